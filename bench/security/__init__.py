"""Prompt injection: attack success on a real model and the scanner's detection and false positives."""
