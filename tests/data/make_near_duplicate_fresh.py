"""Writes near_duplicate_fresh.jsonl beside this file: a fresh set of labelled pairs of task texts for the task
supply's near-duplicate rule (experiments.config.same_task), in the row format of near_duplicate_pairs.jsonl.

This half ("half": "fresh" on every row) was written after the rule's constants were chosen: its forms, phrasings,
subjects and fills are all new (none is taken from make_near_duplicate_pairs.py), and it is only reported, never
tuned on. Each form is one kind of request with 4 hand-written phrasings (synonyms, other verbs, reordered clauses,
questions beside imperatives, digits beside number words) and 8 fills (slots, and for some forms a count). A pair is
- "paraphrase": one fill in two phrasings ("reworded"); for half the fills also the form's first phrasing beside a
  rewording that keeps its opening word ("same_opening");
- "sibling": one phrasing with another fill ("subject") or the same fill with another count ("count"); every fourth
  fill also another fill in other words ("reworded"); per form three "close" pairs whose fills differ in a word or
  a number but ask for a different thing;
- "unrelated": two forms, two fills (kind: the other form);
- "other_request": one subject under two different requests ("Write a short poem about drone delivery." /
  "Predict how drone delivery might change over the next twenty years."), a distinct task sharing its subject.
Deterministic: `python tests/data/make_near_duplicate_fresh.py` rewrites the same file.
"""

from __future__ import annotations

import itertools
import json
import random
import re
from collections import Counter
from pathlib import Path

OUT = Path(__file__).with_name("near_duplicate_fresh.jsonl")
WORDS = {3: "three", 5: "five", 7: "seven", 10: "ten", 15: "fifteen", 20: "twenty", 30: "thirty", 45: "forty-five",
         60: "sixty", 90: "ninety"}

# (name, domain, slots, phrasings, same_opening, fills, counts, close): a phrasing formats the fill's slots, {n}
# (digits) or {nw} (words); a fill is a string for one slot "s", else a tuple in the order of slots; same_opening
# rewords the first phrasing behind its opening word; close holds three pairs of fills that are different tasks.
FORMS: list[tuple] = [
    ("symptoms", "health", "s", ["What are the early warning signs of {s}, and when should someone see a doctor?",
        "Describe the early symptoms of {s} and say when it is time to see a doctor.",
        "Which early signs can point to {s}, and at what point should a person consult a doctor?",
        "When should someone see a doctor about {s}, and what are its early warning signs?"],
     "What early symptoms does {s} cause, and when is it time to see a doctor?",
     ["type 2 diabetes", "Lyme disease", "iron-deficiency anaemia", "a stress fracture", "glaucoma", "hypothyroidism",
      "dehydration in toddlers", "carbon monoxide poisoning"], None,
     [("type 2 diabetes", "type 1 diabetes"), ("hypothyroidism", "hyperthyroidism"),
      ("dehydration in toddlers", "dehydration in older adults")]),
    ("tenant", "law", "js", ["What rights does a tenant in {j} have when {s}?",
        "In {j}, what are a tenant's legal rights when {s}?", "Explain the legal rights of a renter in {j} if {s}.",
        "If {s}, what rights does a tenant in {j} have under the law?"],
     "What legal protections does a renter in {j} have when {s}?",
     [("Germany", "the landlord wants to raise the rent"), ("Ontario", "the landlord wants to sell the building"),
      ("New York State", "the landlord keeps the security deposit"), ("Scotland", "the heating breaks down in winter"),
      ("California", "the landlord refuses to fix mould"), ("Ireland", "the landlord gives notice to end the tenancy"),
      ("France", "the landlord enters the flat without permission"),
      ("Queensland", "a flatmate stops paying their share of the rent")], None,
     [(("Germany", "the landlord wants to raise the rent"), ("Austria", "the landlord wants to raise the rent")),
      (("Ontario", "the landlord wants to sell the building"),
       ("Ontario", "the landlord wants to renovate the building")),
      (("California", "the landlord refuses to fix mould"),
       ("California", "the landlord refuses to fix a broken front-door lock"))]),
    ("loan", "finance", "lr", [
        "Calculate the monthly payment on {l} at {r}% annual interest over {n} years, and show the working.",
        "What is the monthly repayment on {l} at an annual rate of {r}% over {nw} years? Show how you get it.",
        "Work out the monthly instalment for {l} repaid over {n} years at {r}% a year, showing each step.",
        "Over a {n}-year term at {r}% yearly interest, how much is the monthly payment on {l}? Show the calculation."],
     "Calculate, showing each step, what the monthly repayment is on {l} at {r}% a year over {nw} years.",
     [("a $30,000 car loan", "6.9"), ("a $40,000 student loan", "5"), ("a $250,000 mortgage", "4.5"),
      ("a £15,000 personal loan", "7.5"), ("a £60,000 business loan", "9"), ("a €200,000 home loan", "3.2"),
      ("a $12,000 home-improvement loan", "4"), ("a €25,000 loan for a camper van", "6")], [5, 10, 15],
     [(("a $250,000 mortgage", "4.5"), ("a $250,000 mortgage", "5.5")),
      (("a $30,000 car loan", "6.9"), ("a $35,000 car loan", "6.9")),
      (("a £15,000 personal loan", "7.5"), ("a £15,000 personal loan", "9.5"))]),
    ("meal_plan", "nutrition", "s", ["Put together a {n}-day meal plan for {s}.", "Plan {nw} days of meals for {s}.",
        "What should {s} eat over {n} days? Give a day-by-day meal plan.",
        "Draw up a meal plan covering {nw} days for {s}."],
     "Put together {nw} days' worth of meals for {s}, planned day by day.",
     ["a vegetarian marathon runner", "a family of four on a tight budget", "a student who only has a microwave",
      "someone with coeliac disease", "a person managing high blood pressure", "a nurse working night shifts",
      "a teenager who refuses to eat vegetables", "a couple starting a Mediterranean diet"], [3, 5, 7],
     [("a vegetarian marathon runner", "a vegan marathon runner"),
      ("a person managing high blood pressure", "a person managing high cholesterol"),
      ("a nurse working night shifts", "a nurse working day shifts")]),
    ("cover_letter", "writing", "pj", ["Write a cover letter for {p} applying for {j}.",
        "Draft a cover letter that {p} could send when applying for {j}.",
        "Compose a cover letter for an application to {j}, written by {p}.",
        "{p} is applying for {j}. Write the cover letter for them."],
     "Write the cover letter {p} would send with an application for {j}.",
     [("a recent economics graduate", "a junior data analyst role"),
      ("a line cook with eight years of experience", "a head chef position"),
      ("a career changer leaving accounting", "a primary school teaching post"),
      ("a university student", "a weekend barista job"), ("a self-taught designer", "a UX designer role"),
      ("a newly qualified nurse", "a nursing position in paediatrics"),
      ("a forklift driver", "a warehouse supervisor job"), ("an art history PhD", "a museum curator position")], None,
     [(("a recent economics graduate", "a junior data analyst role"),
       ("a recent economics graduate", "a junior data scientist role")),
      (("a university student", "a weekend barista job"), ("a university student", "a weekend bookshop job")),
      (("a newly qualified nurse", "a nursing position in paediatrics"),
       ("a newly qualified nurse", "a nursing position in oncology"))]),
    ("fix_device", "hardware", "s", ["My {s}. What might be causing it, and how can I fix it?",
        "What could explain why my {s}, and what should I do to fix it?",
        "Help me fix this problem: my {s}. What are the likely causes and their fixes?",
        "How do I fix it when my {s}? Start with what might be causing it."],
     "My {s}. Why might this be happening, and what is the fix?",
     ["laptop's fan runs loudly even when it is idle", "printer prints blank pages", "car battery goes flat overnight",
      "phone stops charging at 80 percent", "dishwasher leaves a white film on glasses", "bike chain keeps slipping",
      "external hard drive is not recognised by my computer", "washing machine will not drain"], None,
     [("printer prints blank pages", "printer prints streaky pages"),
      ("washing machine will not drain", "washing machine will not spin"),
      ("bike chain keeps slipping", "bike chain keeps squeaking")]),
    ("translate", "language", "tl", ["Translate the phrase \"{t}\" into {l} and explain the word choices.",
        "How would you say \"{t}\" in {l}? Explain why you chose those words.",
        "Give a {l} translation of \"{t}\", with a note on the choice of words.",
        "Render \"{t}\" in {l}, and explain the choice of wording."],
     "Translate \"{t}\" into {l}, explaining why you chose the words you did.",
     [("Break a leg", "French"), ("The early bird catches the worm", "German"),
      ("We look forward to working with you", "Dutch"), ("Please keep the change", "Italian"),
      ("It's raining cats and dogs", "Greek"), ("Happy retirement", "Swedish"),
      ("Where is the nearest pharmacy?", "Turkish"), ("Thank you for your patience", "Polish")], None,
     [(("Please keep the change", "Italian"), ("Please keep the receipt", "Italian")),
      (("Happy retirement", "Swedish"), ("Happy birthday", "Swedish")),
      (("Thank you for your patience", "Polish"), ("Thank you for your patience", "Czech"))]),
    ("practice", "music", "s", ["Design a {n}-minute daily practice routine for {s}.",
        "Create a daily practice plan of {nw} minutes for {s}.",
        "What should {s} work on in a {n}-minute practice session each day? Lay out the routine.",
        "Put together a {nw}-minute practice routine that {s} can follow every day."],
     "Design a daily routine of {n} minutes of practice for {s}.",
     ["a beginner violinist", "an intermediate jazz guitarist", "an adult learning piano from scratch",
      "a drummer preparing for an audition", "a choir soprano", "a self-taught bass player", "a classical flautist",
      "a teenage trumpet player"], [20, 30, 45],
     [("a beginner violinist", "a beginner cellist"),
      ("an intermediate jazz guitarist", "an intermediate blues guitarist"),
      ("a classical flautist", "a classical clarinettist")]),
    ("scoring", "sport", "s", ["Explain how scoring works in {s}.", "How are points scored in {s}?",
        "Describe the scoring system used in {s}.", "In {s}, how does the scoring work?"],
     "Explain the way points are scored in {s}.",
     ["tennis", "ten-pin bowling", "rugby union", "curling", "artistic gymnastics", "darts", "figure skating",
      "beach volleyball"], None,
     [("rugby union", "rugby league"), ("beach volleyball", "indoor volleyball"),
      ("ten-pin bowling", "candlepin bowling")]),
    ("lesson_plan", "education", "sa", ["Write a {n}-minute lesson plan that introduces {s} to {a}.",
        "Draft a lesson plan for a {nw}-minute class introducing {a} to {s}.",
        "Plan a {n}-minute lesson to introduce {s} to {a}.",
        "How would you structure a {n}-minute lesson introducing {s} to {a}? Give the full lesson plan."],
     "Write the plan for a {nw}-minute lesson introducing {a} to {s}.",
     [("the Pythagorean theorem", "Year 8 pupils"), ("persuasive writing", "Year 10 students"),
      ("the causes of the seasons", "fifth graders"), ("supply and demand", "high school seniors"),
      ("the periodic table", "ninth graders"), ("haiku", "third graders"), ("loops in Scratch", "eleven-year-olds"),
      ("the Magna Carta", "Year 7 pupils")], [30, 45, 60],
     [(("the Pythagorean theorem", "Year 8 pupils"), ("the Pythagorean theorem", "Year 11 pupils")),
      (("supply and demand", "high school seniors"), ("price elasticity", "high school seniors")),
      (("haiku", "third graders"), ("limericks", "third graders"))]),
    ("packing", "travel", "s", ["Make a packing list for {n} days of {s}.",
        "What should I pack for {nw} days of {s}? Give me a list.",
        "List everything I should bring for {nw} days of {s}.", "Draw up a packing list covering {n} days of {s}."],
     "Make a list of what to pack for {nw} days of {s}.",
     ["winter camping in the Alps", "backpacking around Thailand", "business meetings in Singapore",
      "sailing in Croatia", "hiking in the Scottish Highlands", "lounging on the beaches of Crete",
      "skiing in Colorado", "cycle touring in the Netherlands"], [3, 5, 7, 10],
     [("winter camping in the Alps", "summer camping in the Alps"), ("skiing in Colorado", "snowboarding in Colorado"),
      ("sailing in Croatia", "kayaking in Croatia")]),
    ("garden_pest", "gardening", "pc", ["How can I get rid of {p} on my {c} without chemical pesticides?",
        "What are organic ways to get rid of {p} on my {c}?",
        "Suggest chemical-free methods for getting rid of {p} on my {c}.",
        "Without using synthetic pesticides, how do I get rid of {p} on my {c}?"],
     "How do I get {p} off my {c} without resorting to chemical pesticides?",
     [("aphids", "roses"), ("slugs", "hostas"), ("whitefly", "cucumbers"), ("cabbage white caterpillars", "kale"),
      ("spider mites", "indoor palms"), ("vine weevils", "potted fuchsias"), ("scale insects", "lemon tree"),
      ("flea beetles", "radishes")], None,
     [(("aphids", "roses"), ("thrips", "roses")), (("slugs", "hostas"), ("slugs", "lettuces")),
      (("spider mites", "indoor palms"), ("mealybugs", "indoor palms"))]),
    ("contract_clause", "law", "ck", ["What does a {c} clause in {k} mean, and what should I check before signing?",
        "Explain the meaning of the {c} clause in {k} and what to look out for before I sign.",
        "Before I sign {k}, what should I check in its {c} clause, and what does that clause mean?",
        "Help me understand a {c} clause in {k}: what it means and what to check before signing."],
     "What is the meaning of a {c} clause in {k}, and what should be checked before signing?",
     [("non-compete", "an employment contract"), ("force majeure", "a commercial lease"),
      ("indemnity", "a freelance services agreement"), ("liquidated damages", "a building contract"),
      ("arbitration", "a mobile phone contract"), ("automatic renewal", "a gym membership agreement"),
      ("exclusivity", "a book publishing contract"), ("limitation of liability", "a software licence")], None,
     [(("non-compete", "an employment contract"), ("non-solicitation", "an employment contract")),
      (("force majeure", "a commercial lease"), ("force majeure", "a residential lease")),
      (("automatic renewal", "a gym membership agreement"),
       ("automatic renewal", "a streaming subscription agreement"))]),
    ("daily_life", "history", "s", ["Describe what daily life was like for {s}.",
        "What was an ordinary day like for {s}?", "Paint a picture of the everyday life of {s}.",
        "How did {s} spend a typical day? Describe it."],
     "Describe an ordinary day in the life of {s}.",
     ["a peasant in medieval England", "a Roman legionary", "a samurai in Edo-period Japan",
      "a child in Victorian London", "a merchant in Ming-dynasty China", "a sailor on an 18th-century warship",
      "a farmer in the Aztec Empire", "a factory worker in 1910s Detroit"], None,
     [("a samurai in Edo-period Japan", "a merchant in Edo-period Japan"), ("a Roman legionary", "a Roman senator"),
      ("a peasant in medieval England", "a peasant in medieval France")]),
    ("book_summary", "ideas", "s", ["Summarize the main arguments of {s} in {n} bullet points.",
        "In {nw} bullet points, what are the central arguments of {s}?",
        "Give a {n}-point bulleted summary of the key arguments in {s}.",
        "Condense the core arguments of {s} into {nw} bullet points."],
     "Summarize, in {nw} bullet points, the key arguments made in {s}.",
     ["Adam Smith's The Wealth of Nations", "Rachel Carson's Silent Spring", "Darwin's On the Origin of Species",
      "Machiavelli's The Prince", "Mary Wollstonecraft's A Vindication of the Rights of Woman",
      "Thomas Paine's Common Sense", "Jane Jacobs's The Death and Life of Great American Cities",
      "John Stuart Mill's On Liberty"], [3, 5, 7],
     [("Thomas Paine's Common Sense", "Thomas Paine's Rights of Man"),
      ("John Stuart Mill's On Liberty", "John Stuart Mill's Utilitarianism"),
      ("Adam Smith's The Wealth of Nations", "Adam Smith's The Theory of Moral Sentiments")]),
    ("fermi", "science", "s", ["Estimate how many {s}, explaining each assumption.",
        "Give a rough estimate of how many {s}. Show your reasoning and state your assumptions.",
        "Make a back-of-the-envelope estimate of how many {s}, stating every assumption.",
        "Using a Fermi estimate, work out how many {s}; spell out the assumptions you make."],
     "Estimate, with every assumption stated, how many {s}.",
     ["piano tuners work in Chicago", "golf balls fit inside a school bus",
      "litres of water a city of one million people uses in a day", "cups of coffee are drunk in London each morning",
      "trees grow in a typical city park", "words a person speaks in a lifetime", "hairs there are on a human head",
      "kilometres a commercial airliner flies in its working life"], None,
     [("piano tuners work in Chicago", "piano tuners work in Paris"),
      ("golf balls fit inside a school bus", "tennis balls fit inside a school bus"),
      ("cups of coffee are drunk in London each morning", "cups of tea are drunk in London each morning")]),
    ("code_function", "software", "lt", ["Write a {l} function that {t}, and include unit tests.",
        "Implement, in {l}, a function that {t}; add unit tests as well.",
        "I need a {l} function that {t}. Please write it along with unit tests.",
        "Code a function in {l} that {t}, together with unit tests for it."],
     "Write unit tests and a {l} function that {t}.",
     [("Python", "checks whether a string is a valid IPv4 address"), ("JavaScript", "debounces another function"),
      ("Go", "reverses a singly linked list"), ("Rust", "parses a duration such as 1h30m into seconds"),
      ("Java", "merges overlapping intervals in a list"), ("C", "counts the set bits in an unsigned integer"),
      ("Kotlin", "validates an IBAN"), ("TypeScript", "deep-clones a plain object")], None,
     [(("Python", "checks whether a string is a valid IPv4 address"),
       ("Python", "checks whether a string is a valid IPv6 address")),
      (("JavaScript", "debounces another function"), ("JavaScript", "throttles another function")),
      (("Go", "reverses a singly linked list"), ("Go", "reverses a doubly linked list"))]),
    ("pc_build", "hardware", "pb", ["Recommend components for a PC built for {p}, with a budget of {b}.",
        "What parts should I buy to build a PC for {p} if I can spend {b}?",
        "Suggest a parts list for a PC aimed at {p}, on a budget of {b}.",
        "With {b} to spend, which components would you choose for a PC for {p}?"],
     "Recommend the parts to buy for a {b} PC meant for {p}.",
     [("video editing", "$1,500"), ("competitive gaming", "$1,000"), ("running AI models locally", "$2,000"),
      ("music production", "£700"), ("3D rendering", "€1,600"), ("office work and web browsing", "£500"),
      ("streaming games live", "$1,200"), ("CAD and engineering work", "€900")], None,
     [(("video editing", "$1,500"), ("video editing", "$2,500")),
      (("competitive gaming", "$1,000"), ("casual gaming", "$1,000")),
      (("music production", "£700"), ("podcast production", "£700"))]),
    ("decline", "writing", "s", ["Write a polite message turning down {s}.", "Draft a courteous note declining {s}.",
        "How can I politely say no to {s}? Write the message for me.", "Compose a gracious reply that declines {s}."],
     "Write a courteous reply that politely declines {s}.",
     ["a wedding invitation from a colleague", "a job offer after accepting another one",
      "a request to speak at a conference", "a friend's request to borrow money",
      "an invitation to join a startup as a cofounder", "a client's request for a rush discount",
      "a promotion that would mean relocating", "a neighbour's request to split the cost of a new fence"], None,
     [("a wedding invitation from a colleague", "a wedding invitation from a cousin"),
      ("a job offer after accepting another one", "an internship offer after accepting another one"),
      ("a friend's request to borrow money", "a friend's request to borrow my car")]),
    ("go_to_market", "business", "s", ["Outline a go-to-market strategy for {s}.",
        "What go-to-market plan would you propose for {s}?", "Sketch a strategy for taking {s} to market.",
        "How should {s} be brought to market? Describe a go-to-market strategy."],
     "Outline the strategy you would use to bring {s} to market.",
     ["a subscription box for rare teas", "a mobile dog-grooming service", "an app that matches tutors with students",
      "a zero-waste refill delivery service", "a B2B invoicing tool for plumbers", "a line of small-batch hot sauces",
      "a smart plant-watering sensor", "a language-exchange meetup app"], None,
     [("a B2B invoicing tool for plumbers", "a B2B invoicing tool for electricians"),
      ("a line of small-batch hot sauces", "a line of small-batch jams"),
      ("a subscription box for rare teas", "a subscription box for rare coffees")]),
    ("slogan", "marketing", "tc", ["Critique the slogan \"{t}\" for {c}.",
        "What works and what doesn't in \"{t}\" as a slogan for {c}?",
        "Give a critical assessment of \"{t}\" as the slogan of {c}.",
        "How well does the slogan \"{t}\" work for {c}? Give a critique."],
     "Critique \"{t}\" as a slogan for {c}, weighing its strengths and weaknesses.",
     [("Fresh bread, honest prices", "a neighbourhood bakery"), ("Code less, ship more", "a low-code platform"),
      ("Your pet's second home", "a dog boarding kennel"), ("Power to the pedal", "an e-bike shop"),
      ("Sleep like you mean it", "a mattress brand"), ("Numbers you can trust", "an accounting firm"),
      ("Every drop counts", "a water charity"), ("Learn it once, use it forever", "a language school")], None,
     [(("Fresh bread, honest prices", "a neighbourhood bakery"),
       ("Fresh bread, honest prices", "a supermarket chain")),
      (("Sleep like you mean it", "a mattress brand"), ("Sleep like you mean it", "a hotel chain")),
      (("Every drop counts", "a water charity"), ("Every drop counts", "a blood donation service"))]),
    ("choose", "consumer", "abc", ["I'm deciding between {a} and {b} for {c}. Which would you recommend, and why?",
        "For {c}, would you recommend {a} or {b}? Explain your choice.",
        "Which should I pick for {c}: {a} or {b}? Give a recommendation with reasons.",
        "Help me choose between {a} and {b} for {c}, and justify the pick."],
     "I need to choose between {a} and {b} for {c}; which do you recommend, and why?",
     [("a Kindle", "a Kobo", "reading library e-books"),
      ("a heat pump", "a gas boiler", "heating a draughty old house"),
      ("a road bike", "a gravel bike", "a 20 km commute"), ("a Roth IRA", "a traditional IRA", "a 25-year-old saver"),
      ("a mirrorless camera", "a DSLR", "wildlife photography"),
      ("an app like Duolingo", "a weekly tutor", "learning Italian before a trip"),
      ("an air fryer", "a convection oven", "a one-person kitchen"),
      ("a robot vacuum", "a cordless stick vacuum", "a flat with two cats")], None,
     [(("a Kindle", "a Kobo", "reading library e-books"), ("a Kindle", "a Kobo", "reading PDFs")),
      (("a road bike", "a gravel bike", "a 20 km commute"), ("a road bike", "a gravel bike", "a 50 km commute")),
      (("a heat pump", "a gas boiler", "heating a draughty old house"),
       ("a heat pump", "a gas boiler", "heating a new-build flat"))]),
    ("medication", "medicine", "s", ["How does {s} work in the body, and what are its common side effects?",
        "Explain the mechanism of action of {s} and list its usual side effects.",
        "What does {s} do in the body, and which side effects does it commonly cause?",
        "Describe how {s} acts on the body and the side effects people often get from it."],
     "How does {s} act in the body, and which side effects are most common?",
     ["ibuprofen", "metformin", "atorvastatin", "sertraline", "cetirizine", "omeprazole", "metoprolol",
      "levothyroxine"], None,
     [("ibuprofen", "paracetamol"), ("sertraline", "fluoxetine"), ("omeprazole", "lansoprazole")]),
    ("experiment", "science", "s", ["Design a simple experiment to test whether {s}.",
        "How could I test, with a simple experiment, whether {s}?",
        "Propose an easy experiment that would show whether {s}.",
        "Describe a basic experiment for finding out whether {s}."],
     "Design an easy experiment that checks whether {s}.",
     ["plants grow faster when music is played to them", "salt water freezes at a lower temperature than fresh water",
      "heavier paper aeroplanes fly further", "yeast produces more gas at warmer temperatures",
      "the colour of a surface affects how fast it heats up in sunlight", "caffeine shortens reaction time",
      "seeds germinate faster after soaking", "a pendulum's period depends on its length"], None,
     [("yeast produces more gas at warmer temperatures", "yeast produces more gas with more sugar"),
      ("a pendulum's period depends on its length", "a pendulum's period depends on its mass"),
      ("seeds germinate faster after soaking", "seeds germinate faster in the dark")]),
    ("agenda", "business", "s", ["Draft an agenda for a {n}-minute {s}.", "Write the agenda for a {nw}-minute {s}.",
        "What should the agenda be for a {s} lasting {n} minutes?", "Put together a {n}-minute agenda for a {s}."],
     "Draft a {nw}-minute agenda for a {s}.",
     ["kick-off meeting for a website redesign", "quarterly review with a key client",
      "onboarding session for new volunteers", "retrospective after a failed product launch",
      "parent-teacher conference", "board meeting of a small charity", "town hall about an office move",
      "sprint planning session for a mobile app team"], [30, 45, 60, 90],
     [("quarterly review with a key client", "quarterly review with a key supplier"),
      ("retrospective after a failed product launch", "retrospective after a successful product launch"),
      ("board meeting of a small charity", "annual general meeting of a small charity")]),
    ("tax", "finance", "sc", ["Explain how {s} is taxed in {c}.", "How does {c} tax {s}?",
        "What are the tax rules for {s} in {c}?", "In {c}, how is {s} taxed?"],
     "Explain the way {c} taxes {s}.",
     [("profit from selling shares", "the United Kingdom"), ("rental income", "Canada"),
      ("profit from trading cryptocurrency", "Germany"), ("freelance income", "Spain"), ("an inheritance", "Ireland"),
      ("a lump-sum pension withdrawal", "Australia"), ("tip income earned by restaurant staff", "the United States"),
      ("dividend income from foreign companies", "the Netherlands")], None,
     [(("rental income", "Canada"), ("rental income", "the United States")),
      (("freelance income", "Spain"), ("freelance income", "Portugal")),
      (("profit from selling shares", "the United Kingdom"),
       ("profit from selling a second home", "the United Kingdom"))]),
    ("diy", "home", "s", ["Give step-by-step instructions for {s}.", "How do I go about {s}? List the steps in order.",
        "What are the steps, in order, for {s}?", "List each step involved in {s}, in order."],
     "Give me the steps, in order, for {s}.",
     ["replacing a bathroom tap", "patching a hole in drywall", "bleeding a radiator", "regrouting shower tiles",
      "fixing a flat tyre on a bike", "hanging a heavy mirror on a plaster wall",
      "unblocking a kitchen sink without chemicals", "resealing the edge of a bathtub"], None,
     [("replacing a bathroom tap", "replacing a kitchen tap"),
      ("patching a hole in drywall", "patching a crack in a plaster ceiling"),
      ("regrouting shower tiles", "regrouting kitchen floor tiles")]),
    ("substitute", "cooking", "xd", ["What can I use instead of {x} in {d}, and how will it change the result?",
        "If I have no {x}, what can I use in {d} instead, and how will the result differ?",
        "I'm out of {x} for {d}. What's a good substitute, and what difference will it make?",
        "What could replace {x} in {d}, and how would that affect the result?"],
     "What would work in place of {x} in {d}, and how would it change the result?",
     [("eggs", "brownies"), ("buttermilk", "pancakes"), ("heavy cream", "a pasta sauce"),
      ("fish sauce", "a Thai green curry"), ("white wine", "a pan sauce for chicken"), ("butter", "shortbread"),
      ("yeast", "flatbread"), ("vanilla extract", "custard")], None,
     [(("buttermilk", "pancakes"), ("buttermilk", "scones")), (("butter", "shortbread"), ("butter", "croissants")),
      (("eggs", "brownies"), ("eggs", "meatballs"))]),
]

# Another request about the same subject (a distinct task: "Write a short poem about X" beside "Predict how X
# might change"): requests that take any of the subjects below. Pairs of these are labelled "other_request".
SUBJECT_FORMS = [
    "Write a short poem about {s}.", "Write five quiz questions, with answers, to test someone's knowledge of {s}.",
    "What are the most widespread myths about {s}, and what is the truth behind each?",
    "Suggest three research questions a graduate student could investigate about {s}.",
    "What ethical concerns are raised by {s}?", "Predict how {s} might change over the next twenty years.",
    "Write an outline for a ten-minute presentation on {s}.",
    "Build a glossary of ten key terms related to {s}, with a definition for each.",
    "Identify the main stakeholders in {s} and what each one wants.", "Describe three careers connected to {s}.",
    "Propose a debate motion about {s} and give one argument for each side.",
    "How do different countries regulate {s}?",
]
SUBJECTS = [
    "urban beekeeping", "3D printing", "telemedicine", "lab-grown meat", "the four-day work week",
    "electric scooter sharing", "vertical farming", "crowdfunding", "esports", "fast fashion",
    "facial recognition cameras", "gene therapy", "cryptocurrency mining", "space tourism", "home battery storage",
    "online dating apps", "autonomous trucks", "cord blood banking", "desalination plants", "drone delivery",
    "smart home speakers", "cruise ship tourism", "sports betting apps", "carbon capture", "ride-hailing apps",
    "open-plan offices",
]

# "a" before a vowel sound becomes "an"; these words start with a vowel letter but not a vowel sound.
_CONSONANT_SOUND = ("university", "ux", "one", "european", "user", "unit", "usual", "uni")


def _article(m: re.Match) -> str:
    a, word = m.group(1), m.group(2)
    if word.lower().startswith(_CONSONANT_SOUND):
        return m.group(0)
    return ("An" if a == "A" else "an") + " " + word


def render(phrasing: str, fill: dict, n: int | None) -> str:
    extra = {"n": n, "nw": WORDS[n]} if n is not None else {}
    text = re.sub(r"\b([Aa]) ([AEIOUaeiou]\w*)", _article, phrasing.format(**fill, **extra))
    return text[0].upper() + text[1:]


def _fill(slots: str, f) -> dict:
    return dict(zip(slots, (f,) if isinstance(f, str) else f))


def pairs() -> list[dict]:
    rng = random.Random(20240611)
    out: list[dict] = []
    for f, (name, domain, slots, phr, same_opening, raw, counts, close) in enumerate(FORMS):
        fills = [_fill(slots, x) for x in raw]
        combos = list(itertools.combinations(range(len(phr)), 2))
        rng.shuffle(combos)

        def row(a: str, b: str, label: str, kind: str) -> None:
            out.append({"a": a, "b": b, "label": label, "form": name, "domain": domain, "kind": kind,
                        "half": "fresh"})

        for i, fill in enumerate(fills):
            n = counts[i % len(counts)] if counts else None
            p, q = combos[i % len(combos)]
            row(render(phr[p], fill, n), render(phr[q], fill, n), "paraphrase", "reworded")
            if i % 2 == 1:  # the same request reworded behind the same opening word
                row(render(phr[0], fill, n), render(same_opening, fill, n), "paraphrase", "same_opening")
            k = (i + f) % len(phr)
            if counts and i % 2:  # the same subject with another count
                row(render(phr[k], fill, n), render(phr[k], fill, counts[(i + 1) % len(counts)]), "sibling", "count")
            else:
                other = fills[(i + 1 + rng.randrange(len(fills) - 1)) % len(fills)]
                row(render(phr[k], fill, n), render(phr[k], other, n), "sibling", "subject")
            if i % 4 == 1:  # another subject, asked in other words
                row(render(phr[p], fill, n), render(phr[q], fills[(i + 3) % len(fills)], n), "sibling", "reworded")
            g = (f + 1 + rng.randrange(len(FORMS) - 1)) % len(FORMS)
            other_form = FORMS[g]
            row(render(phr[k], fill, n),
                render(rng.choice(other_form[3]), _fill(other_form[2], rng.choice(other_form[5])),
                       rng.choice(other_form[6]) if other_form[6] else None), "unrelated", other_form[0])
        for j, (x, y) in enumerate(close):
            n = counts[j % len(counts)] if counts else None
            k = (j + f + 1) % len(phr)
            row(render(phr[k], _fill(slots, x), n), render(phr[k], _fill(slots, y), n), "sibling", "close")
    for j, subject in enumerate(SUBJECTS):
        for k in range(5):
            a, b = (j + k) % len(SUBJECT_FORMS), (j + 2 * k + 1) % len(SUBJECT_FORMS)
            out.append({"a": render(SUBJECT_FORMS[a], {"s": subject}, None),
                        "b": render(SUBJECT_FORMS[b], {"s": subject}, None), "label": "other_request",
                        "form": f"subject:{subject}", "domain": "mixed", "kind": "other_form", "half": "fresh"})
    return out


def main() -> None:
    rows = pairs()
    OUT.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    labels = Counter(r["label"] for r in rows)
    kinds = Counter((r["label"], "other_form" if r["label"] == "unrelated" else r["kind"]) for r in rows)
    print(f"wrote {OUT}: {len(rows)} pairs from {len(FORMS)} forms; "
          + ", ".join(f"fresh/{lab} {c}" for lab, c in sorted(labels.items())))
    print("by kind: " + ", ".join(f"{lab}/{kind} {c}" for (lab, kind), c in sorted(kinds.items())))


if __name__ == "__main__":
    main()
