"""Writes near_duplicate_pairs.jsonl beside this file: labelled pairs of task texts that the task supply's
near-duplicate rule (experiments.config.same_task) is measured on.

Each form is one kind of request with several hand-written phrasings (real rewordings: synonyms, other verbs,
reordered clauses, digits spelled out) and eight fills (the subject, and for some forms a count). A pair is

- "paraphrase": one fill in two different phrasings (the same task asked twice); for half the fills also the
  form's first phrasing beside a rewording that keeps its opening word ("same_opening");
- "sibling": one phrasing with another fill, or the same fill with another count (a different task of the same
  form); a quarter of them also change the phrasing ("reworded": another task, asked in other words);
- "unrelated": two forms, two fills;
- "other_request": one subject under two different requests ("Give best practices for working with Redis." /
  "Summarize the history of Redis."), a distinct task that shares its subject.

Forms alternate between the halves "tune" (the rule's thresholds were chosen on it) and "heldout" (only
reported), so no phrasing or subject of the held-out half was seen while tuning. Deterministic:
`python tests/data/make_near_duplicate_pairs.py` rewrites the same file.
"""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path

OUT = Path(__file__).with_name("near_duplicate_pairs.jsonl")
WORDS = {3: "three", 4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight", 10: "ten", 12: "twelve", 20: "twenty"}

# (name, domain, phrasings, fills, counts): a phrasing formats the fill's fields, {n} (digits) or {nw} (words);
# counts is None for a form without one.
FORMS: list[tuple[str, str, list[str], list[dict], list[int] | None]] = [
    ("mistakes", "mixed", [
        "List {n} common mistakes when {s} and how to avoid each.",
        "Name {nw} frequent errors people make when {s}, and how to prevent each one.",
        "What are {n} typical pitfalls of {s}? Explain how to avoid each of them.",
    ], [{"s": s} for s in ("using Python's json module", "kneading bread dough", "writing SQL migrations",
                            "tuning hyperparameters for a random forest", "writing Dockerfiles",
                            "citing sources in an academic essay", "pruning fruit trees", "negotiating a salary")],
     [3, 5, 7]),
    ("best_practices", "devops", [
        "Give best practices for {s} in production.",
        "What are good practices for {s} in a production environment?",
        "Describe the recommended practices for {s} in production systems.",
        "In production, what practices are recommended for {s}?",
    ], [{"s": s} for s in ("using Python's subprocess module", "running Kubernetes cron jobs",
                            "managing PostgreSQL connection pools", "serving a PyTorch model behind an API",
                            "rotating TLS certificates", "logging in a Node.js service", "caching with Redis",
                            "running database backups")], None),
    ("how_it_works", "computing", [
        "Explain how {s} works and its design trade-offs.",
        "Describe how {s} works and the trade-offs in its design.",
        "How does {s} work, and what design trade-offs does it make?",
        "Give an explanation of the inner workings of {s} and the compromises in its design.",
    ], [{"s": s} for s in ("Python's pickle module", "the Raft consensus algorithm", "a B-tree index",
                            "Git's packfile format", "TCP congestion control", "the JVM's garbage collector",
                            "a Bloom filter", "the Linux page cache")], None),
    ("compare", "mixed", [
        "Compare {a} and {b} for {u}.",
        "How do {a} and {b} differ when used for {u}?",
        "For {u}, what are the differences between {a} and {b}?",
        "Contrast {a} with {b} as choices for {u}.",
    ], [dict(zip("abu", t)) for t in (
        ("PostgreSQL", "MySQL", "analytics workloads"), ("Kafka", "RabbitMQ", "event streaming"),
        ("React", "Vue", "a small dashboard"), ("cast iron pans", "stainless steel pans", "searing steak"),
        ("Terraform", "Pulumi", "managing cloud infrastructure"), ("XGBoost", "LightGBM", "tabular classification"),
        ("Markdown", "reStructuredText", "project documentation"), ("oil paint", "acrylic paint", "landscape painting"))],
     None),
    ("causes", "history", [
        "What were the main causes of {s}?",
        "Explain the principal causes of {s}.",
        "Why did {s} happen? Describe its main causes.",
        "Outline the key factors that led to {s}.",
    ], [{"s": s} for s in ("the French Revolution", "the fall of the Western Roman Empire", "the First World War",
                            "the 2008 financial crisis", "the Protestant Reformation",
                            "the collapse of the Soviet Union", "the American Civil War", "the Great Depression")],
     None),
    ("recipe", "cooking", [
        "Describe the steps to make {s} at home.",
        "How do I cook {s} at home? Walk me through the steps.",
        "Give step-by-step instructions for preparing {s} in a home kitchen.",
        "Explain, step by step, how to make {s} at home.",
    ], [{"s": s} for s in ("a sourdough loaf", "a mushroom risotto", "fresh egg pasta", "a French omelette",
                            "chicken tikka masala", "a lemon meringue pie", "Japanese ramen broth",
                            "a Neapolitan pizza")], None),
    ("uses", "mixed", [
        "List {n} uses of {s}.",
        "Name {nw} applications of {s}.",
        "What are {n} common uses of {s}?",
        "Give {n} examples of what {s} is used for.",
    ], [{"s": s} for s in ("Python's itertools module", "baking soda", "a hash map", "vinegar in cooking",
                            "drones in agriculture", "regular expressions", "blockchain outside finance",
                            "the Fourier transform")], [3, 4, 5, 10]),
    ("beginner", "education", [
        "Explain {s} to a beginner.",
        "Give a beginner-friendly explanation of {s}.",
        "How would you explain {s} to someone who is new to it?",
        "Describe {s} in simple terms for a newcomer.",
    ], [{"s": s} for s in ("gradient descent", "database normalization", "the Krebs cycle", "compound interest",
                            "public-key cryptography", "the offside rule in football", "photosynthesis",
                            "Big-O notation")], None),
    ("product_copy", "writing", [
        "Write a {n}-word product description for {s}.",
        "Draft a product description of about {n} words for {s}.",
        "Compose a {n}-word description of {s} for an online shop.",
    ], [{"s": s} for s in ("a stainless steel water bottle", "noise-cancelling headphones", "a bamboo cutting board",
                            "a mechanical keyboard", "a hiking backpack", "a ceramic teapot", "a standing desk",
                            "a wool winter scarf")], [50, 100, 150]),
    ("troubleshoot", "devops", [
        "How do I troubleshoot {s}?",
        "What steps should I take to diagnose {s}?",
        "Explain how to debug {s}.",
        "Give a troubleshooting guide for {s}.",
    ], [{"s": s} for s in ("a Kubernetes pod stuck in CrashLoopBackOff", "slow PostgreSQL queries",
                            "a memory leak in a Java service", "a Wi-Fi network that keeps dropping",
                            "a failing GitHub Actions workflow", "high CPU usage on a Linux server",
                            "DNS resolution failures", "a sourdough starter that will not rise")], None),
    ("pros_cons", "mixed", [
        "What are the pros and cons of {s}?",
        "List the advantages and disadvantages of {s}.",
        "Discuss the benefits and drawbacks of {s}.",
        "Weigh the upsides and downsides of {s}.",
    ], [{"s": s} for s in ("microservices", "remote work", "nuclear power", "a monorepo", "serverless functions",
                            "electric cars", "homeschooling", "static typing")], None),
    ("biography", "history", [
        "Summarize the life and achievements of {s}.",
        "Give a short biography of {s}, highlighting the main achievements.",
        "Who was {s}, and what did they achieve?",
        "Describe the life of {s} and what they are known for.",
    ], [{"s": s} for s in ("Ada Lovelace", "Marie Curie", "Genghis Khan", "Alan Turing", "Frida Kahlo",
                            "Nikola Tesla", "Cleopatra", "Leonardo da Vinci")], None),
    ("overfitting", "ml", [
        "How can I reduce overfitting in {s}?",
        "What techniques help prevent overfitting when training {s}?",
        "Suggest ways to limit overfitting in {s}.",
        "Explain methods to avoid overfitting {s}.",
    ], [{"s": s} for s in ("a convolutional neural network", "a gradient boosting model", "a small language model",
                            "a linear regression with many features", "a decision tree",
                            "a recurrent neural network", "a recommender system", "a speech recognition model")],
     None),
    ("setup", "devops", [
        "Set up {a} on {b}: give the steps.",
        "What are the steps to set up {a} on {b}?",
        "Walk me through installing and configuring {a} on {b}.",
        "Explain how to set up {a} on {b}.",
    ], [dict(zip("ab", t)) for t in (
        ("Prometheus monitoring", "Ubuntu"), ("a PostgreSQL replica", "AWS"), ("an nginx reverse proxy", "Debian"),
        ("GitLab CI runners", "Kubernetes"), ("a WireGuard VPN", "a Raspberry Pi"), ("Grafana dashboards", "Docker"),
        ("an Elasticsearch cluster", "Azure"), ("a Jenkins server", "CentOS"))], None),
    ("sql_top", "databases", [
        "Write a SQL query that returns the top {n} customers by {s}.",
        "Give an SQL query listing the {n} customers with the highest {s}.",
        "Compose a SQL statement to fetch the top {nw} customers ranked by {s}.",
    ], [{"s": s} for s in ("total order value", "number of orders", "average basket size", "lifetime revenue",
                            "number of returns", "loyalty points", "account age", "refund amount")], [5, 10, 20]),
    ("study_plan", "education", [
        "Make a {n}-week study plan for learning {s}.",
        "Create a {nw}-week plan to learn {s}.",
        "Design a study schedule over {n} weeks for learning {s}.",
        "Plan {nw} weeks of study to learn {s}.",
    ], [{"s": s} for s in ("Spanish", "linear algebra", "the Rust programming language", "music theory",
                            "organic chemistry", "machine learning", "Japanese", "statistics")], [4, 6, 8, 12]),
    ("itinerary", "travel", [
        "Plan a {n}-day itinerary for {s}.",
        "Suggest a {nw}-day travel plan for {s}.",
        "Draft a day-by-day itinerary for {n} days in {s}.",
        "What should I do on a {n}-day trip to {s}? Give a day-by-day plan.",
    ], [{"s": s} for s in ("Kyoto", "Lisbon", "Iceland", "New York City", "Morocco", "Rome", "Patagonia", "Vietnam")],
     [3, 5, 7, 10]),
    ("attacks", "security", [
        "Explain how {s} attacks work and how to defend against them.",
        "How do {s} attacks work, and how can systems be protected from them?",
        "Describe the mechanics of {s} attacks and the defences against them.",
        "What is a {s} attack, and how do you prevent it?",
    ], [{"s": s} for s in ("SQL injection", "phishing", "cross-site scripting", "ransomware", "DDoS",
                            "man-in-the-middle", "credential stuffing", "supply chain")], None),
    ("formal_email", "writing", [
        "Write a formal email to {s}.",
        "Draft a formal email addressed to {s}.",
        "Compose a formal message by email to {s}.",
    ], [{"s": s} for s in ("a landlord asking for a broken heater to be repaired",
                            "a professor requesting an extension on an essay",
                            "a client apologising for a delayed delivery",
                            "a hiring manager following up after an interview", "a neighbour about a noisy party",
                            "a supplier disputing an invoice", "a school asking about enrolment",
                            "a bank reporting a lost card")], None),
    ("derive", "math", [
        "Derive the formula for {s}.",
        "Show the derivation of the formula for {s}.",
        "How is the formula for {s} derived? Show the steps.",
        "Walk through deriving the formula for {s}.",
    ], [{"s": s} for s in ("the variance of a binomial distribution", "the sum of a geometric series",
                            "the area of a circle", "ordinary least squares coefficients",
                            "the roots of a quadratic equation", "continuously compounded interest",
                            "the standard error of the mean", "the volume of a sphere")], None),
    ("books", "mixed", [
        "Recommend {n} books about {s}.",
        "Suggest {nw} books on {s}.",
        "What are {n} good books to read about {s}?",
        "Name {n} books worth reading on the topic of {s}.",
    ], [{"s": s} for s in ("the history of science", "distributed systems", "stoic philosophy",
                            "behavioural economics", "the Cold War", "typography", "evolutionary biology",
                            "software architecture")], [3, 5, 10]),
    ("migrate", "software", [
        "How do I migrate a project from {a} to {b}?",
        "Describe the steps to move a project from {a} to {b}.",
        "Give a migration guide for switching a project from {a} to {b}.",
        "What is involved in migrating a codebase from {a} to {b}?",
    ], [dict(zip("ab", t)) for t in (
        ("Python 2", "Python 3"), ("JavaScript", "TypeScript"), ("MySQL", "PostgreSQL"),
        ("Jenkins", "GitHub Actions"), ("AngularJS", "React"), ("Java 8", "Java 17"), ("REST", "GraphQL"),
        ("Webpack", "Vite"))], None),
    ("balcony", "gardening", [
        "How do I grow {s} on a balcony?",
        "What is the best way to grow {s} on a balcony?",
        "Give advice for growing {s} on a small balcony.",
        "Explain how to cultivate {s} on a balcony.",
    ], [{"s": s} for s in ("tomatoes", "strawberries", "basil", "chili peppers", "lettuce", "blueberries", "mint",
                            "potatoes")], None),
    ("inflation", "economics", [
        "Explain how {s} affects inflation.",
        "In what ways does {s} influence inflation?",
        "Describe the effect of {s} on inflation.",
        "How does {s} have an impact on inflation?",
    ], [{"s": s} for s in ("raising interest rates", "quantitative easing", "a rise in oil prices",
                            "a weaker currency", "government deficit spending", "rising wages",
                            "supply chain disruption", "a tariff on imports")], None),
    ("api_design", "software", [
        "Design a REST API for {s} with {n} endpoints.",
        "Sketch a REST API with {n} endpoints for {s}.",
        "Propose {nw} REST endpoints for {s}.",
        "What {nw} endpoints would a REST API for {s} need? Design them.",
    ], [{"s": s} for s in ("a library lending system", "a to-do list app", "a hotel booking service",
                            "a recipe sharing site", "an online bookstore", "a parking garage", "a fitness tracker",
                            "a concert ticketing system")], [4, 5, 6, 8]),
    ("workout", "fitness", [
        "Create a beginner workout plan focused on {s}.",
        "Design a workout routine for beginners that targets {s}.",
        "Suggest a beginner's exercise plan to improve {s}.",
        "Put together a training plan for a beginner who wants to work on {s}.",
    ], [{"s": s} for s in ("core strength", "flexibility", "running endurance", "upper-body strength", "balance",
                            "posture", "cardiovascular fitness", "grip strength")], None),
    ("style", "arts", [
        "Explain the main characteristics of {s}.",
        "What are the defining features of {s}?",
        "Describe the key traits that characterise {s}.",
        "Outline what sets {s} apart as a style.",
    ], [{"s": s} for s in ("Baroque music", "Impressionist painting", "Gothic architecture", "bebop jazz",
                            "Art Deco design", "Cubism", "minimalist music", "Brutalist architecture")], None),
    ("db_feature", "databases", [
        "When should I use {s} in a database?",
        "In what situations is {s} worth using in a database?",
        "Explain when {s} is the right choice in a database.",
        "What are good use cases for {s} in a database?",
    ], [{"s": s} for s in ("a composite index", "a materialized view", "a partial index", "table partitioning",
                            "a foreign key constraint", "a stored procedure", "a trigger", "row-level locking")],
     None),
    ("classroom", "education", [
        "Suggest {n} classroom activities to teach {s} to ten-year-olds.",
        "Give {nw} ideas for classroom activities that teach {s} to 10-year-old children.",
        "What are {n} activities a teacher could use to teach {s} to ten-year-olds?",
    ], [{"s": s} for s in ("fractions", "the water cycle", "photosynthesis", "basic coding", "map reading",
                            "the solar system", "poetry", "ancient Egypt")], [3, 4, 5, 6]),
    ("metric", "ml", [
        "What does {s} measure, and when should it be used?",
        "Explain what {s} measures and when it is appropriate.",
        "When is {s} the right metric, and what does it capture?",
        "Describe what {s} tells you and in which cases to use it.",
    ], [{"s": s} for s in ("the F1 score", "ROC AUC", "mean absolute error", "perplexity", "the BLEU score",
                            "precision at k", "log loss", "R-squared")], None),
]


SAME_OPENING: dict[str, str] = {
    "mistakes": "List {n} typical errors people make when {s}, and how to prevent each.",
    "best_practices": "Give the recommended practices to follow for {s} when in production.",
    "how_it_works": "Explain the inner workings of {s} and the trade-offs behind its design.",
    "compare": "Compare the strengths of {a} and {b} when used for {u}.",
    "causes": "What were the principal factors that caused {s}?",
    "recipe": "Describe how to cook {s} at home, step by step.",
    "uses": "List {nw} common applications of {s}.",
    "beginner": "Explain {s} in plain words to someone just starting out.",
    "product_copy": "Write a product description of roughly {n} words for {s}.",
    "troubleshoot": "How should I go about diagnosing {s}?",
    "pros_cons": "What are the advantages and disadvantages of {s}?",
    "biography": "Summarize the biography of {s} and the main things accomplished.",
    "overfitting": "How can overfitting be kept down when training {s}?",
    "setup": "Set up {a} on {b} and describe each step.",
    "sql_top": "Write an SQL statement listing the {n} customers with the greatest {s}.",
    "study_plan": "Make a study schedule of {n} weeks to learn {s}.",
    "itinerary": "Plan {nw} days of sightseeing in {s}, day by day.",
    "attacks": "Explain the mechanics of {s} attacks and how systems can be defended from them.",
    "formal_email": "Write an email in a formal tone to {s}.",
    "derive": "Derive, step by step, the formula for {s}.",
    "books": "Recommend {nw} good books on {s}.",
    "migrate": "How would I go about moving a codebase from {a} to {b}?",
    "balcony": "How can {s} be grown on a balcony?",
    "inflation": "Explain the ways in which {s} influences inflation.",
    "api_design": "Design {nw} endpoints of a REST API for {s}.",
    "workout": "Create a workout routine for a beginner that works on {s}.",
    "style": "Explain what the defining traits of {s} are.",
    "db_feature": "When is it a good idea to use {s} in a database?",
    "classroom": "Suggest {nw} activities for a class of ten-year-olds that teach {s}.",
    "metric": "What does {s} capture, and in which situations is it the right metric?",
}
# ^ per form, a rewording that keeps the opening word of the form's first phrasing (the harder paraphrase: a
# template-like pair whose subject is kept and whose request is reworded)

# Close siblings: per form, two subjects that differ in a word or two (the hard case: one slot of a long template
# changed, as when a generator varies a subject list).
NEAR: dict[str, list[tuple]] = {
    "mistakes": [("using Python's json module", "using Python's csv module"), ("kneading bread dough", "kneading pizza dough"),
                 ("writing SQL migrations", "writing SQL stored procedures")],
    "best_practices": [("using Python's subprocess module", "using Python's threading module"),
                       ("managing PostgreSQL connection pools", "managing MySQL connection pools"),
                       ("caching with Redis", "caching with Memcached")],
    "how_it_works": [("Python's pickle module", "Python's weakref module"), ("a B-tree index", "a hash index"),
                     ("the Raft consensus algorithm", "the Paxos consensus algorithm")],
    "compare": [({"a": "PostgreSQL", "b": "MySQL", "u": "analytics workloads"},
                 {"a": "PostgreSQL", "b": "SQLite", "u": "analytics workloads"}),
                ({"a": "React", "b": "Vue", "u": "a small dashboard"}, {"a": "React", "b": "Svelte", "u": "a small dashboard"}),
                ({"a": "Kafka", "b": "RabbitMQ", "u": "event streaming"}, {"a": "Kafka", "b": "RabbitMQ", "u": "task queues"})],
    "causes": [("the French Revolution", "the Russian Revolution"), ("the First World War", "the Second World War"),
               ("the fall of the Western Roman Empire", "the fall of the Byzantine Empire")],
    "recipe": [("a sourdough loaf", "a rye loaf"), ("a mushroom risotto", "a seafood risotto"),
               ("a lemon meringue pie", "a key lime pie")],
    "uses": [("Python's itertools module", "Python's functools module"), ("baking soda", "baking powder"),
             ("a hash map", "a binary heap")],
    "beginner": [("gradient descent", "backpropagation"), ("the Krebs cycle", "glycolysis"),
                 ("compound interest", "simple interest")],
    "product_copy": [("a mechanical keyboard", "a wireless mouse"), ("a hiking backpack", "a hiking tent"),
                     ("a ceramic teapot", "a ceramic vase")],
    "troubleshoot": [("slow PostgreSQL queries", "slow MongoDB queries"),
                     ("a memory leak in a Java service", "a memory leak in a Go service"),
                     ("high CPU usage on a Linux server", "high disk usage on a Linux server")],
    "pros_cons": [("microservices", "a modular monolith"), ("nuclear power", "wind power"),
                  ("static typing", "dynamic typing")],
    "biography": [("Ada Lovelace", "Grace Hopper"), ("Marie Curie", "Rosalind Franklin"), ("Nikola Tesla", "Thomas Edison")],
    "overfitting": [("a convolutional neural network", "a graph neural network"), ("a decision tree", "a random forest"),
                    ("a recurrent neural network", "a transformer model")],
    "setup": [({"a": "Prometheus monitoring", "b": "Ubuntu"}, {"a": "Prometheus monitoring", "b": "Windows Server"}),
              ({"a": "an nginx reverse proxy", "b": "Debian"}, {"a": "an Apache reverse proxy", "b": "Debian"}),
              ({"a": "a PostgreSQL replica", "b": "AWS"}, {"a": "a PostgreSQL replica", "b": "Google Cloud"})],
    "sql_top": [("total order value", "total refund value"), ("number of orders", "number of reviews"),
                ("average basket size", "average delivery time")],
    "study_plan": [("Spanish", "Portuguese"), ("linear algebra", "abstract algebra"), ("Japanese", "Korean")],
    "itinerary": [("Kyoto", "Osaka"), ("Lisbon", "Porto"), ("Iceland", "Norway")],
    "attacks": [("SQL injection", "command injection"), ("phishing", "spear phishing"),
                ("cross-site scripting", "cross-site request forgery")],
    "formal_email": [("a landlord asking for a broken heater to be repaired", "a landlord asking for a leaking roof to be repaired"),
                     ("a professor requesting an extension on an essay", "a professor requesting feedback on an essay"),
                     ("a bank reporting a lost card", "a bank disputing a card payment")],
    "derive": [("the variance of a binomial distribution", "the variance of a Poisson distribution"),
               ("the area of a circle", "the area of an ellipse"), ("the volume of a sphere", "the volume of a cone")],
    "books": [("the history of science", "the history of mathematics"), ("stoic philosophy", "existentialist philosophy"),
              ("the Cold War", "the Vietnam War")],
    "migrate": [({"a": "JavaScript", "b": "TypeScript"}, {"a": "Flow", "b": "TypeScript"}),
                ({"a": "MySQL", "b": "PostgreSQL"}, {"a": "Oracle", "b": "PostgreSQL"}),
                ({"a": "Jenkins", "b": "GitHub Actions"}, {"a": "Jenkins", "b": "GitLab CI"})],
    "balcony": [("tomatoes", "cherry tomatoes"), ("basil", "parsley"), ("chili peppers", "bell peppers")],
    "inflation": [("raising interest rates", "cutting interest rates"), ("a rise in oil prices", "a rise in food prices"),
                  ("a weaker currency", "a stronger currency")],
    "api_design": [("a hotel booking service", "a flight booking service"), ("an online bookstore", "an online pharmacy"),
                   ("a to-do list app", "a note-taking app")],
    "workout": [("core strength", "leg strength"), ("upper-body strength", "lower-body strength"), ("flexibility", "mobility")],
    "style": [("Baroque music", "Romantic music"), ("Gothic architecture", "Romanesque architecture"),
              ("Impressionist painting", "Expressionist painting")],
    "db_feature": [("a composite index", "a covering index"), ("a materialized view", "a regular view"),
                   ("a stored procedure", "a user-defined function")],
    "classroom": [("fractions", "decimals"), ("the solar system", "the phases of the moon"), ("ancient Egypt", "ancient Rome")],
    "metric": [("the F1 score", "the F2 score"), ("mean absolute error", "mean squared error"), ("the BLEU score", "the ROUGE score")],
}


# Another request about the same subject (a distinct task: "Give best practices for X" beside "Explain how X
# works"): forms that take any noun phrase, and subjects from many domains. Pairs of these are labelled
# "other_request" and reported on their own.
SUBJECT_FORMS = [
    "Give best practices for working with {s}.",
    "Explain how {s} works and its design trade-offs.",
    "What are the pros and cons of {s}?",
    "List the most common mistakes people make with {s}.",
    "Give a beginner-friendly explanation of {s}.",
    "Summarize the history of {s}.",
    "Compare {s} with its main alternatives.",
    "What are good use cases for {s}?",
    "Describe how to get started with {s}.",
    "How do I troubleshoot problems with {s}?",
]
SUBJECTS = [
    "Python's subprocess module", "a B-tree index", "sourdough baking", "the Raft consensus algorithm", "Kubernetes",
    "gradient descent", "the printing press", "compound interest", "container gardening", "public-key cryptography",
    "Redis", "the French press", "watercolour painting", "the Pomodoro technique", "GraphQL", "solar panels",
    "the Roman aqueducts", "transfer learning", "feature flags", "cold brew coffee", "index funds", "TLS certificates",
    "the Dewey decimal system", "pair programming",
]


def render(phrasing: str, fill: dict, n: int | None) -> str:
    extra = {"n": n, "nw": WORDS.get(n, str(n))} if n is not None else {}
    text = phrasing.format(**fill, **extra).replace(" a eight", " an eight")
    return text[0].upper() + text[1:]


def pairs() -> list[dict]:
    rng = random.Random(7)
    out: list[dict] = []
    for f, (name, domain, phr, fills, counts) in enumerate(FORMS):
        half = "tune" if f % 2 == 0 else "heldout"
        combos = list(itertools.combinations(range(len(phr)), 2))

        def row(a: str, b: str, label: str, kind: str) -> None:
            out.append({"a": a, "b": b, "label": label, "form": name, "domain": domain, "kind": kind, "half": half})

        for i, fill in enumerate(fills):
            n = counts[i % len(counts)] if counts else None
            p, q = combos[i % len(combos)]
            row(render(phr[p], fill, n), render(phr[q], fill, n), "paraphrase", "reworded")
            if i % 2 == 0:  # the same request reworded behind the same opening word
                row(render(phr[0], fill, n), render(SAME_OPENING[name], fill, n), "paraphrase", "same_opening")
            other = fills[(i + 1) % len(fills)]
            k = i % len(phr)
            if counts and i % 2:  # the same subject with another count
                m = counts[(i + 1) % len(counts)]
                row(render(phr[k], fill, n), render(phr[k], fill, m), "sibling", "count")
            else:
                row(render(phr[k], fill, n), render(phr[k], other, n), "sibling", "subject")
            if i % 4 == 0:  # another subject, asked in other words
                row(render(phr[p], fill, n), render(phr[q], fills[(i + 3) % len(fills)], n), "sibling", "reworded")
            g = (f + 1 + rng.randrange(len(FORMS) - 1)) % len(FORMS)
            _, _, phr2, fills2, counts2 = FORMS[g]
            row(render(phr[k], fill, n), render(rng.choice(phr2), rng.choice(fills2),
                                                  rng.choice(counts2) if counts2 else None), "unrelated", FORMS[g][0])
        for j, (x, y) in enumerate(NEAR[name]):
            x, y = (x, y) if isinstance(x, dict) else ({"s": x}, {"s": y})
            n = counts[j % len(counts)] if counts else None
            k = (j + 1) % len(phr)
            row(render(phr[k], x, n), render(phr[k], y, n), "sibling", "close")
    for j, subject in enumerate(SUBJECTS):
        half = "tune" if j % 2 == 0 else "heldout"
        for k in range(5):
            f, g = (j + k) % len(SUBJECT_FORMS), (j + k + 1 + k) % len(SUBJECT_FORMS)
            if f == g:
                continue
            out.append({"a": render(SUBJECT_FORMS[f], {"s": subject}, None),
                        "b": render(SUBJECT_FORMS[g], {"s": subject}, None), "label": "other_request",
                        "form": f"subject:{subject}", "domain": "mixed", "kind": "other_form", "half": half})
    return out


def main() -> None:
    rows = pairs()
    OUT.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    by = {}
    for r in rows:
        by[(r["half"], r["label"])] = by.get((r["half"], r["label"]), 0) + 1
    print(f"wrote {OUT}: {len(rows)} pairs; " + ", ".join(f"{h}/{lab} {c}" for (h, lab), c in sorted(by.items())))


if __name__ == "__main__":
    main()
