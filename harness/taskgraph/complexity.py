"""Seed 004's complexity heuristic: ComplexityScore(task) -> 0..10, calibrated so plan-first fires only when a
step graph pays off. Three capped signals: action verbs (5), file artefacts (3), sequencers (2); English and pt-BR.
Calibrated for coding tasks; the orchestrator routes research tasks with its own route score (route_score), which
reuses FILE_RE and SEQUENCER_RE.
"""

from __future__ import annotations

import re

_ACTION_VERBS = (
    # en
    "implement add create fix refactor write test deploy build run update remove delete rename migrate install "
    "configure document design benchmark measure generate draft research investigate compare analyze analyse "
    "evaluate review summarize summarise synthesize synthesise assemble combine integrate merge debug optimize "
    "optimise profile save publish release "
    # pt-BR (infinitive and imperative)
    "implementar implemente adicionar adicione criar crie corrigir corrija escrever escreva testar teste "
    "refatorar refatore atualizar atualize remover remova executar execute rodar rode construir construa "
    "publicar publique implantar implante configurar configure documentar documente pesquisar pesquise "
    "comparar analisar analise resumir resuma sintetizar sintetize gerar gere salvar salve instalar instale "
    "migrar migre revisar revise avaliar avalie integrar integre otimizar otimize depurar depure"
).split()
_VERB_RE = re.compile(r"\b(" + "|".join(sorted(set(_ACTION_VERBS), key=len, reverse=True)) + r")\b", re.IGNORECASE)
FILE_RE = re.compile(
    r"(?<![\w/.-])[\w./-]*\w\.(?:go|ts|tsx|js|jsx|mjs|py|pyi|ipynb|md|rst|txt|yaml|yml|json|toml|ini|cfg|conf|"
    r"xml|html|css|sql|sh|bash|rs|java|kt|c|h|cc|cpp|hpp|rb|php|cs|swift|csv|pdf|docx|xlsx|pptx|proto|tf)\b"
    r"|\b(?:Dockerfile|Makefile|Containerfile|Jenkinsfile|Procfile|Vagrantfile|Gemfile|Rakefile|Taskfile)\b"
)
SEQUENCER_RE = re.compile(
    r"\b(?:e em seguida|em seguida|e depois|depois disso|depois|por fim|por último|finalmente|logo após|após|"
    r"and then|after that|afterwards|then|after|finally|lastly|next|subsequently|followed by|once done)\b",
    re.IGNORECASE,
)
VERB_CAP, FILE_CAP, SEQUENCER_CAP = 5, 3, 2


def complexity_breakdown(task: str) -> dict[str, int]:
    """The three capped signals of complexity_score and their total."""
    text = task or ""
    verbs = min(len(_VERB_RE.findall(text)), VERB_CAP)
    files = min(len(set(m.group(0) for m in FILE_RE.finditer(text))), FILE_CAP)
    sequencers = min(len(SEQUENCER_RE.findall(text)), SEQUENCER_CAP)
    return {"verbs": verbs, "files": files, "sequencers": sequencers, "score": verbs + files + sequencers}


def complexity_score(task: str) -> int:
    """0-10: action verbs (cap 5) + file artefacts (cap 3) + sequencers (cap 2); English and pt-BR."""
    return complexity_breakdown(task)["score"]
