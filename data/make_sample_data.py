"""Writes the sample data of data/: original, templated text about fictional places.

Every sentence comes from the templates in this file with a fixed seed, so the
text is this project's own (no third-party corpus) and the outputs are
reproducible byte for byte. The outputs are committed, so demo.py needs no
generation step; re-run this after changing a template:

  python data/make_sample_data.py                  # rewrites the files beside this script
  python data/make_sample_data.py --out_dir=/tmp/x # or somewhere else

Outputs:
  pretraining_corpus.txt       one sentence per line, a blank line between documents
  mrpc_sample/{train,dev,test}.tsv
                               MRPC-format paraphrase pairs (1 = the same fact reworded,
                               0 = a different fact: another topic, claim, name or number)
  squad_sample.json            SQuAD v1.1 questions on town profiles
  swag_sample/{train,val}.csv  SWAG-format four-way sentence endings
  conll_sample/{train,dev,test}.txt
                               CoNLL-2003 NER (word POS chunk tag, IOB1 PER/LOC/ORG/MISC)
"""

import argparse
import csv
import io
import json
import os
import random

SEED = 20240607

# ------------------------------------------------------------------ name pools
# Invented word parts; combined they give names that belong to no real place.

TOWN_HEADS = ["Bram", "Cal", "Dun", "Ell", "Fen", "Gar", "Hol", "Ivy", "Kest", "Lark", "Mer",
              "Nor", "Ost", "Pen", "Quill", "Rook", "Sel", "Thorn", "Ulm", "Vane", "Wren", "Yew",
              "Ash", "Birch", "Cinder", "Dove", "Elder", "Fern", "Glen", "Heron"]
TOWN_TAILS = ["wick", "ford", "haven", "ton", "bury", "moor", "dale", "stead", "mouth", "field",
              "brook", "cliff", "gate", "hollow", "mere", "ridge", "port", "well", "combe", "hurst"]
FIRST_NAMES = {
    "she": ["Anna", "Beatrix", "Clara", "Dora", "Edith", "Freya", "Greta", "Hana", "Ida", "Julia",
            "Kira", "Lena", "Mara", "Nina", "Olga", "Petra", "Rosa", "Sofia", "Tilda", "Vera",
            "Wanda", "Yara", "Zoe", "Elsa", "Maya"],
    "he": ["Aaron", "Bruno", "Casper", "Dario", "Emil", "Felix", "Gustav", "Hugo", "Igor",
           "Jonas", "Karl", "Leon", "Marek", "Nils", "Oscar", "Pavel", "Rafael", "Stefan",
           "Tomas", "Viktor", "Walter", "Yusuf", "Anton", "Bernard", "Milo"],
}
SURNAME_HEADS = ["Ald", "Brack", "Corn", "Dray", "Ember", "Fair", "Hart", "Kell", "Lind", "Marl",
                 "Pem", "Red", "Stan", "Tall", "Whit", "Wood", "Ash", "Black", "Cole", "Fitch"]
SURNAME_TAILS = ["well", "ley", "by", "ton", "ridge", "wood", "more", "field", "son", "stone"]
RIVERS = ["Silvan", "Orrin", "Tavy", "Lune", "Corra", "Wendle", "Brisk", "Mallow", "Idle",
          "Sorrel", "Amber", "Teal", "Morrow", "Fenny", "Kestle", "Dunmore"]
BRAND_HEADS = ["Lumo", "Bright", "Nimbo", "Kestro", "Vanta", "Orbi", "Pello", "Zephy", "Tessa",
               "Quarro", "Halo", "Mira", "Soli", "Trova", "Vela", "Nova"]
BRAND_TAILS = ["line", "craft", "works", "vale", "tek", "forge", "wave", "point"]
PRODUCTS = ["kettle", "bicycle", "desk lamp", "backpack", "rain jacket", "coffee grinder", "tent",
            "camera", "toaster", "radio", "blender", "sewing machine", "electric scooter",
            "telescope", "drone", "wristwatch"]
MASCOTS = ["Otters", "Falcons", "Badgers", "Comets", "Herons", "Foxes", "Millers", "Rovers",
           "Pilots", "Lanterns", "Stags", "Ravens", "Tides", "Anchors"]
SPORTS = ["football", "basketball", "hockey", "rugby", "volleyball", "handball"]
INDUSTRIES = ["wool weaving", "clock making", "apple farming", "boat building", "glassblowing",
              "cheese making", "paper milling", "salt harvesting", "pottery", "bell casting",
              "rope making", "honey production"]
LANDMARKS = ["a stone bridge", "an old lighthouse", "a covered market", "a clock tower",
             "a botanical garden", "a windmill", "a copper-roofed library", "a ruined castle",
             "a glass greenhouse", "a narrow canal"]
FESTIVALS = ["lantern", "harvest", "kite", "river", "music", "cheese", "apple", "snow", "boat",
             "flower", "bread", "puppet"]
PROFESSIONS = ["painter", "engineer", "baker", "cyclist", "architect", "composer", "botanist",
               "chess player", "pilot", "novelist", "photographer", "chemist", "sculptor",
               "violinist"]
COLOURS = ["red", "green", "blue", "grey", "yellow", "black", "white", "orange", "teal", "purple"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September",
          "October", "November", "December"]
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
DIRECTIONS = ["north", "south", "east", "west", "northwest", "southeast"]
PRIZES = ["Golden Acorn", "Silver Kite", "Blue Lantern", "Copper Bell"]
HOBBIES = {"sailing": "sailing", "gardening": "in the garden", "birdwatching": "watching birds",
           "chess": "playing chess", "mountain walking": "walking in the mountains",
           "baking": "baking bread"}
SKIES = ["clear", "cloudy", "overcast", "hazy", "bright", "grey"]


def comma_number(n):
  return "{:,}".format(n)


class World:
  """Draws fictional entities; each document gets its own."""

  def __init__(self, rng):
    self.rng = rng
    self.towns = [h + t[1:] if h[-1] == t[0] else h + t for h in TOWN_HEADS for t in TOWN_TAILS]
    self.surnames = [h + t[1:] if h[-1] == t[0] else h + t
                     for h in SURNAME_HEADS for t in SURNAME_TAILS]
    self.brands = [h + t for h in BRAND_HEADS for t in BRAND_TAILS]

  def town(self):
    return self.rng.choice(self.towns)

  def person(self):
    pronoun = self.rng.choice(["she", "he"])
    name = "%s %s" % (self.rng.choice(FIRST_NAMES[pronoun]), self.rng.choice(self.surnames))
    return name, pronoun

  def brand(self):
    return self.rng.choice(self.brands)

  def river(self):
    return "the %s River" % self.rng.choice(RIVERS)


def cap(text):
  return text[0].upper() + text[1:]


def possessive(pronoun):
  return {"she": "her", "he": "his"}[pronoun]


# ------------------------------------------------------------ corpus documents
# Six kinds of document (a town, a person, a product review, a team's season, a
# week of weather, a firm), each about its own names; neighbouring sentences
# share those names and the document's subject, so next-sentence prediction
# has something to learn.

def in_order(rng, sentences, count):
  """`count` of the sentences, kept in their story order."""
  return [sentences[i] for i in sorted(rng.sample(range(len(sentences)), count))]


def story(rng, fields, opening, body, fewest, most):
  """An opening sentence, then `fewest` to `most` of the body's in order, filled in: the shape
  of every document kind but the weather diary."""
  sentences = [rng.choice(opening)] + in_order(rng, body, rng.randint(fewest, most))
  return [cap(s.format(**fields)) for s in sentences]


def town_document(world, rng):
  town = world.town()
  other = world.town()
  mayor, mp = world.person()
  f = dict(town=town, other=other, mayor=mayor, mp=mp, mpos=possessive(mp),
           year=rng.randint(1500, 1950), pop=comma_number(rng.randint(8, 900) * 100 +
                                                          rng.randint(0, 99)),
           river=world.river(), industry=rng.choice(INDUSTRIES),
           landmark=rng.choice(LANDMARKS), festival=rng.choice(FESTIVALS),
           month=rng.choice(MONTHS), day=rng.choice(DAYS), km=rng.randint(4, 180),
           schools=rng.randint(2, 30), elected=rng.randint(1990, 2023),
           rain=rng.randint(400, 1800), hills=rng.choice(["low hills", "a wide valley",
                                                          "a rocky coast", "flat farmland",
                                                          "pine forests", "chalk cliffs"]))
  f["year2"] = rng.randint(f["year"] + 20, 2023) if f["year"] < 2003 else 2023
  opening = [
      "{town} is a small town on the banks of {river}.",
      "{town} lies in {hills}, about {km} kilometres from {other}.",
      "The town of {town} grew up where {river} meets the old coast road.",
  ]
  body = [
      "It was founded in {year} by a group of families from {other}.",
      "The first houses in {town} were built in {year}.",
      "Today {town} has a population of {pop}.",
      "Around {pop} people live in {town} and the villages nearby.",
      "The town is best known for {industry}, which has employed its people for generations.",
      "For centuries {industry} was the main trade of {town}.",
      "Visitors come to see {landmark} near the town square.",
      "The most photographed sight in {town} is {landmark}.",
      "Every {month}, {town} holds a {festival} festival that fills the streets.",
      "The {festival} festival in {month} is the busiest week of the year in {town}.",
      "{mayor} has been the mayor of {town} since {elected}.",
      "The current mayor, {mayor}, was elected in {elected}.",
      "{mayor} says {mp} wants to bring more young families to {town}.",
      "In {mpos} first speech, {mayor} promised to repair the bridge over {river}.",
      "There are {schools} schools in {town}.",
      "Children from {other} often travel to the schools in {town}.",
      "A market is held on the main square every {day}.",
      "On {day} mornings the square is full of stalls selling bread, fruit and cheese.",
      "{town} receives about {rain} millimetres of rain each year.",
      "Winters in {town} are mild, but the wind from {river} can be cold.",
      "A railway line connects {town} with {other}.",
      "The bus to {other} takes about an hour.",
      "Local historians say the name {town} comes from an old word for a meeting place.",
      "The town museum has a room about the history of {industry}.",
      "Floods from {river} damaged the lower streets in the spring of {year2}.",
      "After the flood of {year2}, the people of {town} built a long stone wall along the river.",
      "Many families in {town} keep small gardens behind their houses.",
      "The town library was rebuilt in {year2} with money raised by residents.",
      "Young people from {town} often move to {other} to study.",
      "Cyclists like the quiet roads between {town} and {other}.",
  ]
  return story(rng, f, opening, body, 8, 18)


def person_document(world, rng):
  name, p = world.person()
  last = name.split()[1]
  f = dict(name=name, last=last, p=p, P=cap(p), pos=possessive(p), town=world.town(),
           town2=world.town(), year=rng.randint(1890, 2000), profession=rng.choice(PROFESSIONS),
           mentor=world.person()[0], prize=rng.choice(PRIZES),
           works=rng.randint(3, 60), hobby=rng.choice(sorted(HOBBIES)),
           brand=world.brand(), product=rng.choice(PRODUCTS))
  f["hobby_ing"] = HOBBIES[f["hobby"]]
  f["moved"] = f["year"] + rng.randint(18, 35)
  f["prize_year"] = f["moved"] + rng.randint(1, 15)
  f["street_year"] = min(2023, f["prize_year"] + rng.randint(1, 20))
  opening = [
      "{name} is a {profession} from {town}.",
      "{name} was born in {town} in {year}.",
      "The {profession} {name} grew up in {town}.",
  ]
  body = [
      "{P} was born in {year} and spent {pos} childhood near the harbour of {town}.",
      "As a child, {last} spent long afternoons watching the workshops of {town}.",
      "{P} studied with {mentor}, who taught {pos} students to work slowly and carefully.",
      "{mentor} later said that {last} was the most patient student of all.",
      "In {moved}, {last} moved to {town2}.",
      "{P} opened a small studio in {town2} in {moved}.",
      "Over the years {last} completed {works} major works.",
      "By the end of {pos} career, {name} had finished {works} projects.",
      "In {prize_year} {p} won the {prize} prize.",
      "The {prize} prize, won in {prize_year}, made {last} famous across the region.",
      "Outside of work, {last} enjoys {hobby}.",
      "{P} spends most weekends {hobby_ing}.",
      "{last} once helped design the {brand} {product}.",
      "Friends describe {name} as quiet, curious and stubborn.",
      "Many of {pos} early works can still be seen in {town}.",
      "A street in {town} was named after {last} in {street_year}.",
      "{P} still visits {town} every summer.",
      "Students in {town2} often visit {pos} studio to ask for advice.",
      "{last} says the light in {town2} changed the way {p} works.",
      "A short film about {name} was shown at the festival in {town2}.",
  ]
  return story(rng, f, opening, body, 7, 15)


def product_document(world, rng):
  reviewer, rp = world.person()
  f = dict(brand=world.brand(), product=rng.choice(PRODUCTS), price=rng.randint(15, 900),
           weight=rng.randint(2, 95) / 10, colour=rng.choice(COLOURS),
           hours=rng.randint(2, 40), reviewer=reviewer, rating=rng.randint(2, 5),
           town=world.town(), year=rng.randint(2005, 2023), warranty=rng.randint(1, 5),
           rival=world.brand())
  opening = [
      "The {brand} {product} is a new {product} made in {town}.",
      "This is a review of the {brand} {product}.",
      "{brand} released its {product} in {year}.",
  ]
  body = [
      "It costs {price} dollars in most shops.",
      "At {price} dollars, the {brand} {product} is not the cheapest on the market.",
      "The {product} weighs {weight} kilograms.",
      "It weighs only {weight} kilograms, so it is easy to carry.",
      "It comes in {colour} and two other colours.",
      "Our test model was {colour}, with a matte finish.",
      "The battery lasts about {hours} hours on a full charge.",
      "After {hours} hours of use, the battery finally ran out.",
      "{reviewer} tested the {product} for three weeks.",
      "{reviewer} gave the {brand} {product} {rating} out of 5 stars.",
      "In the end, {reviewer} rated it {rating} stars.",
      "The factory in {town} has made products for {brand} since {year}.",
      "Compared with the {rival} model, the {brand} {product} feels sturdier.",
      "The {rival} version is lighter, but it breaks more easily.",
      "{brand} offers a {warranty}-year warranty.",
      "The warranty covers {warranty} years of normal use.",
      "The instructions are short and clear.",
      "Some users say the buttons are too small.",
      "The box is made from recycled cardboard.",
      "Spare parts can be ordered directly from {brand}.",
  ]
  return story(rng, f, opening, body, 7, 14)


def sports_document(world, rng):
  town = world.town()
  star, sp = world.person()
  f = dict(team="%s %s" % (town, rng.choice(MASCOTS)),
           rival="%s %s" % (world.town(), rng.choice(MASCOTS)), town=town,
           sport=rng.choice(SPORTS), coach=world.person()[0], star=star, spos=possessive(sp),
           wins=rng.randint(3, 25), losses=rng.randint(1, 20), year=rng.randint(1995, 2023),
           stadium="%s Park" % rng.choice(world.surnames),
           capacity=comma_number(rng.randint(20, 400) * 100), goals=rng.randint(5, 40),
           a=rng.randint(2, 9), b=rng.randint(0, 1), month=rng.choice(MONTHS))
  opening = [
      "The {team} are a {sport} team from {town}.",
      "The {year} season was a memorable one for the {team}.",
      "{town} has supported the {team} for decades.",
  ]
  body = [
      "They play their home games at {stadium}, which holds {capacity} fans.",
      "{stadium} was full for almost every home game.",
      "The team is coached by {coach}.",
      "{coach} took over as coach before the {year} season.",
      "In {year} the {team} won {wins} games and lost {losses}.",
      "They finished the season with {wins} wins and {losses} losses.",
      "Their star player, {star}, scored {goals} times.",
      "{star} scored {goals} goals, more than anyone else in the league.",
      "The biggest game was against the {rival}.",
      "In {month}, the {team} beat the {rival} {a} to {b}.",
      "Fans still talk about the {a}-{b} win over the {rival}.",
      "{star} broke {spos} wrist in the spring and missed six games.",
      "After the final whistle, {coach} thanked the supporters from {town}.",
      "Tickets for games at {stadium} cost less than a cinema ticket.",
      "The team trains on a field beside the river in {town}.",
      "Many of the players grew up in {town}.",
      "The {rival} have been their rivals for more than fifty years.",
      "{coach} believes the team can win the cup next year.",
  ]
  return story(rng, f, opening, body, 7, 14)


def degrees(t):
  return "%d degree%s" % (t, "" if abs(t) == 1 else "s")


def weather_document(world, rng):
  town = world.town()
  month = rng.choice(MONTHS)
  sentences = [rng.choice([
      "This is the weather diary of {town} for one week in {month}.",
      "Here is how the weather changed in {town} during a week in {month}.",
      "The weather station in {town} kept these notes in {month}.",
  ]).format(town=town, month=month)]
  temperature = rng.randint(-8, 28)
  start = rng.randrange(7)
  for offset in range(rng.randint(4, 7)):
    day = DAYS[(start + offset) % 7]
    temperature += rng.randint(-4, 4)
    rain = rng.choice([0, 0, 0, rng.randint(1, 35)])
    f = dict(day=day, town=town, t=degrees(temperature), rain=rain, wind=rng.randint(5, 70),
             dir=rng.choice(DIRECTIONS), sky=rng.choice(SKIES))
    sentences.append(rng.choice([
        "On {day} the temperature in {town} reached {t}.",
        "{day} was {sky}, with a high of {t}.",
        "The thermometer in {town} showed {t} on {day} afternoon.",
    ]).format(**f))
    if rain:
      sentences.append(rng.choice([
          "{rain} millimetres of rain fell on {town} that day.",
          "It rained {rain} millimetres, and the streets of {town} flooded briefly.",
          "Showers brought {rain} millimetres of rain by the evening.",
      ]).format(**f))
    else:
      sentences.append(rng.choice([
          "It stayed dry all day.",
          "No rain fell, and the sky stayed {sky}.",
          "The farmers around {town} hoped for rain, but none came.",
      ]).format(**f))
    if rng.random() < 0.6:
      sentences.append(rng.choice([
          "The wind blew from the {dir} at {wind} kilometres per hour.",
          "A {dir} wind reached {wind} kilometres per hour.",
          "Gusts of {wind} kilometres per hour came from the {dir}.",
      ]).format(**f))
  return sentences


def company_document(world, rng):
  founder, fp = world.person()
  f = dict(company="%s %s" % (world.brand(), rng.choice(["Company", "Works", "and Sons",
                                                         "Cooperative"])),
           founder=founder, fpos=possessive(fp), town=world.town(),
           year=rng.randint(1820, 1990), staff=comma_number(rng.randint(12, 4000)),
           product=rng.choice(PRODUCTS), industry=rng.choice(INDUSTRIES),
           sales=rng.randint(2, 900), other=world.town())
  opening = [
      "The {company} is a firm based in {town}.",
      "{founder} founded the {company} in {year}.",
      "The story of the {company} began in a small workshop in {town}.",
  ]
  body = [
      "{founder} started the business in {year} with two workers.",
      "The {company} was founded in {year}.",
      "At first it made tools for {industry}.",
      "Its first product was a simple {product}.",
      "Today the {company} employs {staff} people.",
      "More than {staff} people work for the firm in {town} and {other}.",
      "Last year the firm sold {sales} thousand units of its {product}.",
      "Sales of the {product} reached {sales} thousand units last year.",
      "{founder} ran the firm until {fpos} death, and {fpos} children took over.",
      "A second factory opened in {other} to keep up with demand.",
      "The firm is one of the largest employers in {town}.",
      "Every worker at the {company} receives a share of the profits.",
      "The old workshop in {town} is now a small museum.",
      "{founder} believed that a good tool should last a lifetime.",
  ]
  return story(rng, f, opening, body, 6, 12)


DOCUMENT_KINDS = [town_document, person_document, product_document, sports_document,
                  weather_document, company_document]


def make_corpus(rng, num_documents):
  world = World(rng)
  documents = [rng.choice(DOCUMENT_KINDS)(world, rng) for _ in range(num_documents)]
  return "\n\n".join("\n".join(d) for d in documents) + "\n"


# --------------------------------------------------------------- MRPC-style pairs
# A fact has slots (names, numbers) and several wordings. A paraphrase pair says
# the same fact twice in two different wordings; a non-paraphrase pair states a
# different fact (see make_pair). So the label depends only on whether the
# facts agree, and the pairs range from easy (another topic) to hard (one
# changed number), as in real paraphrase data.

FACTS = {
    "population": (["town", "pop"], [
        "{town} has a population of {pop}.",
        "About {pop} people live in {town}.",
        "The population of {town} is roughly {pop}.",
        "{town} is home to around {pop} residents.",
    ]),
    "founded": (["town", "year"], [
        "{town} was founded in {year}.",
        "The town of {town} dates back to {year}.",
        "Settlers established {town} in {year}.",
        "{town} has existed since it was founded in {year}.",
    ]),
    "mayor": (["town", "person"], [
        "{person} is the mayor of {town}.",
        "The mayor of {town} is {person}.",
        "{town} is led by its mayor, {person}.",
        "Voters in {town} chose {person} as their mayor.",
    ]),
    "river": (["town", "river"], [
        "{river} flows through {town}.",
        "{town} lies on the banks of {river}.",
        "{town} was built beside {river}.",
        "{river} runs right through the middle of {town}.",
    ]),
    "price": (["brand", "product", "price"], [
        "The {brand} {product} costs {price} dollars.",
        "You can buy the {brand} {product} for {price} dollars.",
        "{brand} sells its {product} for {price} dollars.",
        "The price of the {brand} {product} is {price} dollars.",
    ]),
    "match": (["team", "rival", "a", "b"], [
        "The {team} beat the {rival} {a} to {b}.",
        "The {team} won {a}-{b} against the {rival}.",
        "The {rival} lost {b}-{a} to the {team}.",
        "In a {a} to {b} game, the {team} defeated the {rival}.",
    ]),
    "rain": (["town", "day", "rain"], [
        "{town} had {rain} millimetres of rain on {day}.",
        "On {day}, {rain} millimetres of rain fell in {town}.",
        "{rain} millimetres of rain were measured in {town} on {day}.",
        "It rained {rain} millimetres in {town} on {day}.",
    ]),
    "born": (["person", "town", "year"], [
        "{person} was born in {town} in {year}.",
        "{person} was born in {year} in the town of {town}.",
        "In {year}, {person} was born in {town}.",
        "{town} is where {person} was born, in {year}.",
    ]),
    "founder": (["person", "company", "year"], [
        "{person} founded the {company} in {year}.",
        "The {company} was started by {person} in {year}.",
        "In {year}, {person} set up the {company}.",
        "The {company} has been around since {person} founded it in {year}.",
    ]),
    "staff": (["company", "staff"], [
        "The {company} employs {staff} people.",
        "{staff} people work for the {company}.",
        "The {company} has a staff of {staff}.",
        "There are {staff} employees at the {company}.",
    ]),
}
TOPICS = {"population": "town", "founded": "town", "mayor": "town", "river": "town",
          "price": "product", "match": "sports", "rain": "weather", "born": "person",
          "founder": "company", "staff": "company"}
# Facts sharing a subject slot, for "same subject, another claim" negatives.
SUBJECT_FACTS = {"town": ["population", "founded", "mayor", "river"],
                 "person": ["born", "founder"], "company": ["founder", "staff"]}


def draw_slot(world, rng, slot):
  if slot == "town":
    return world.town()
  if slot == "pop":
    return comma_number(rng.randint(8, 900) * 100 + rng.randint(0, 99))
  if slot == "year":
    return str(rng.randint(1500, 2020))
  if slot == "person":
    return world.person()[0]
  if slot == "river":
    return world.river()
  if slot == "brand":
    return world.brand()
  if slot == "product":
    return rng.choice(PRODUCTS)
  if slot == "price":
    return str(rng.randint(15, 900))
  if slot in ("team", "rival"):
    return "%s %s" % (world.town(), rng.choice(MASCOTS))
  if slot == "a":
    return str(rng.randint(2, 9))
  if slot == "b":
    return str(rng.randint(0, 1))
  if slot == "day":
    return rng.choice(DAYS)
  if slot == "rain":
    return str(rng.randint(1, 60))
  if slot == "company":
    return "%s %s" % (world.brand(), rng.choice(["Company", "Works", "Cooperative"]))
  if slot == "staff":
    return comma_number(rng.randint(12, 4000))
  raise KeyError(slot)


def draw_fact(world, rng, kind, given=None):
  slots, _ = FACTS[kind]
  fact = {slot: draw_slot(world, rng, slot) for slot in slots}
  fact.update(given or {})
  return fact


def changed(world, rng, kind, fact):
  """The fact with one slot replaced by a different value."""
  slots, _ = FACTS[kind]
  slot = rng.choice(slots)
  new = dict(fact)
  while new[slot] == fact[slot]:
    new[slot] = draw_slot(world, rng, slot)
  return new


def make_pair(world, rng):
  """(label, sentence 1, sentence 2); two different wordings either way.

  Non-paraphrases come in four kinds, from easy to hard: a fact on another
  topic (45%), another claim about the same subject (15%), the same kind of
  fact about other names and numbers (20%), the same fact with one name or
  number changed (20%).
  """
  kind = rng.choice(sorted(FACTS))
  slots, templates = FACTS[kind]
  fact = draw_fact(world, rng, kind)
  first, second = rng.sample(range(len(templates)), 2)
  text_a = cap(templates[first].format(**fact))
  if rng.random() < 0.5:
    return "1", text_a, cap(templates[second].format(**fact))
  draw = rng.random()
  subject = next((s for s in slots if s in SUBJECT_FACTS), None)
  if draw < 0.45 or (draw < 0.6 and not subject):
    other_kind = rng.choice([k for k in sorted(FACTS) if TOPICS[k] != TOPICS[kind]])
    other = draw_fact(world, rng, other_kind)
    return "0", text_a, cap(rng.choice(FACTS[other_kind][1]).format(**other))
  if draw < 0.6:
    other_kind = rng.choice([k for k in SUBJECT_FACTS[subject] if k != kind])
    other = draw_fact(world, rng, other_kind, {subject: fact[subject]})
    return "0", text_a, cap(rng.choice(FACTS[other_kind][1]).format(**other))
  if draw < 0.8:
    return "0", text_a, cap(templates[second].format(**draw_fact(world, rng, kind)))
  return "0", text_a, cap(templates[second].format(**changed(world, rng, kind, fact)))


def make_mrpc_split(rng, size):
  world = World(rng)
  out = io.StringIO()
  out.write("Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n")
  for _ in range(size):
    label, text_a, text_b = make_pair(world, rng)
    out.write("%s\t%d\t%d\t%s\t%s\n" % (label, rng.randint(100000, 3999999),
                                         rng.randint(100000, 3999999), text_a, text_b))
  return out.getvalue()


# ----------------------------------------------------------------- SQuAD sample

def make_squad(rng, num_articles):
  world = World(rng)
  articles = []
  for article in range(num_articles):
    town = world.town()
    mayor = world.person()[0]
    f = dict(town=town, year=str(rng.randint(1500, 1950)),
             pop=comma_number(rng.randint(8, 900) * 100 + rng.randint(0, 99)),
             river=world.river(), mayor=mayor, industry=rng.choice(INDUSTRIES),
             landmark=rng.choice(LANDMARKS), festival=rng.choice(FESTIVALS),
             month=rng.choice(MONTHS), other=world.town(), km=str(rng.randint(4, 180)))
    # (sentence, [(question, answer slot)]): the answer is looked up in its own sentence.
    parts = [
        ("{town} is a town on {river}, about {km} kilometres from {other}.",
         [("Which river is {town} on?", "river"),
          ("How far is {town} from {other}?", "km")]),
        ("It was founded in {year} by families who came from {other}.",
         [("When was {town} founded?", "year")]),
        ("The town has a population of {pop}.",
         [("How many people live in {town}?", "pop")]),
        ("For centuries its main trade has been {industry}.",
         [("What has been the main trade of {town}?", "industry")]),
        ("Visitors come to see {landmark} near the square.",
         [("What do visitors come to {town} to see?", "landmark")]),
        ("Every {month} the town holds a {festival} festival.",
         [("In which month does {town} hold its {festival} festival?", "month")]),
        ("The current mayor is {mayor}.",
         [("Who is the mayor of {town}?", "mayor")]),
    ]
    head, rest = parts[0], parts[1:]
    rng.shuffle(rest)
    context, qas = "", []
    for template, questions in [head] + rest:
      sentence = template.format(**f)
      start = len(context) + (1 if context else 0)
      context = (context + " " + sentence) if context else sentence
      for question, slot in questions:
        answer = f[slot]
        if slot == "km":
          answer = "%s kilometres" % f["km"]
        offset = sentence.index(answer)
        qas.append({"id": "demo-%03d-%d" % (article, len(qas)),
                    "question": question.format(**f),
                    "answers": [{"text": answer, "answer_start": start + offset}]})
    for qa in qas:
      answer = qa["answers"][0]
      assert context[answer["answer_start"]:][:len(answer["text"])] == answer["text"]
    articles.append({"title": town, "paragraphs": [{"context": context, "qas": qas}]})
  return json.dumps({"version": "1.1", "data": articles}, indent=1) + "\n"


# ------------------------------------------------------------------ SWAG sample
# A scene, the start of the next sentence, and four endings: the right one
# continues the scene; the three others belong to other scenes.

SCENES = [
    (["{name} fills the {brand} kettle with cold water.",
      "{name} puts a pot of water on the stove."],
     ["switches it on and waits for the water to boil.",
      "takes two cups down from the shelf while the water heats up."]),
    (["{name} pumps up the tyres of {pos} bicycle.",
      "{name} wheels {pos} bicycle out of the shed."],
     ["climbs on and rides off down the lane.",
      "checks the brakes before setting off towards {town}."]),
    (["{name} opens the box and lifts out a new tent.",
      "{name} unrolls a tent on the grass by the lake."],
     ["pushes the poles through the sleeves and raises it.",
      "hammers the pegs into the ground one by one."]),
    (["{name} kneels in the garden with a bag of seeds.",
      "{name} digs a row of small holes in the vegetable bed."],
     ["drops a seed into each hole and covers it with soil.",
      "waters the freshly planted row with a watering can."]),
    (["{name} walks onto the court holding a basketball.",
      "{name} bounces the ball twice at the free-throw line."],
     ["shoots, and the ball drops cleanly through the hoop.",
      "passes the ball to a teammate running towards the basket."]),
    (["{name} sits down at the piano in the concert hall.",
      "{name} opens the music book on the piano stand."],
     ["places {pos} hands on the keys and begins to play.",
      "plays the first notes softly as the audience falls silent."]),
    (["{name} cracks three eggs into a bowl.",
      "{name} melts butter in a frying pan."],
     ["whisks the eggs with a fork and adds a pinch of salt.",
      "pours the beaten eggs into the pan and stirs them gently."]),
    (["{name} pulls on {pos} boots at the bottom of the mountain path.",
      "{name} looks up at the steep trail leading to the summit."],
     ["starts climbing slowly, stopping now and then to rest.",
      "ties {pos} laces tightly and begins the long walk up."]),
    (["{name} sets up an easel beside the river in {town}.",
      "{name} squeezes blue and white paint onto a palette."],
     ["sketches the outline of the bridge with a pencil.",
      "dips a brush into the paint and starts on the sky."]),
    (["{name} unlocks the door of the bakery before sunrise.",
      "{name} tips a bag of flour into the big mixing bowl."],
     ["kneads the dough until it is smooth and elastic.",
      "shapes the dough into loaves and slides them into the oven."]),
    (["{name} dives into the pool at the start of the race.",
      "{name} stands on the starting block and adjusts {pos} goggles."],
     ["swims the first length with long, even strokes.",
      "touches the wall first and looks up at the clock."]),
    (["{name} sits down at a desk with a stack of letters.",
      "{name} picks up a pen and a pad of paper."],
     ["reads each letter carefully and writes a short reply.",
      "signs {pos} name at the bottom of the page."]),
    (["{name} carries a ladder to the side of the house.",
      "{name} leans a ladder against the roof of the shed."],
     ["climbs up carefully to clear the leaves from the gutter.",
      "replaces the broken tile and climbs back down."]),
    (["{name} points the {brand} telescope at the night sky.",
      "{name} sets up a telescope in a dark field outside {town}."],
     ["adjusts the focus until the moon appears sharp.",
      "writes down the position of each star in a notebook."]),
]


def make_swag(rng, size, id_offset):
  world = World(rng)
  fields = ["video-id", "fold-ind", "startphrase", "sent1", "sent2", "gold-source",
            "ending0", "ending1", "ending2", "ending3", "label"]
  out = io.StringIO()
  writer = csv.writer(out, lineterminator="\n")
  writer.writerow(fields)
  for index in range(size):
    name, pronoun = world.person()
    f = dict(name=name, pos=possessive(pronoun), brand=world.brand(), town=world.town())
    scene = rng.randrange(len(SCENES))
    sent1 = rng.choice(SCENES[scene][0]).format(**f)
    sent2 = rng.choice([cap(pronoun), "Then " + pronoun, "Next, " + pronoun])
    right = rng.choice(SCENES[scene][1]).format(**f)
    others = rng.sample([s for s in range(len(SCENES)) if s != scene], 3)
    endings = [rng.choice(SCENES[s][1]).format(**f) for s in others]
    label = rng.randrange(4)
    endings.insert(label, right)
    writer.writerow(["demo-%04d" % (id_offset + index), str(id_offset + index),
                     sent1 + " " + sent2, sent1, sent2, "gen"] + endings + [str(label)])
  return out.getvalue()


# ------------------------------------------------------------------ CoNLL-2003 NER
# Sentences of words tagged PER, LOC, ORG and MISC in the four columns of CoNLL-2003
# (word, part of speech, syntactic chunk, named entity) with the original's IOB1 tags.
# The POS and chunk columns come from a small word list (NNP inside names): enough for
# the format, not a tagger's output.

NER_POS = {".": ".", ",": ",", ":": ":", "'s": "POS", "the": "DT", "a": "DT", "in": "IN",
           "of": "IN", "on": "IN", "at": "IN", "from": "IN", "near": "IN", "for": "IN",
           "to": "TO", "with": "IN", "and": "CC", "by": "IN", "after": "IN", "v": "CC",
           "said": "VBD", "visited": "VBD", "opened": "VBD", "won": "VBD", "beat": "VBD",
           "joined": "VBD", "moved": "VBD", "met": "VBD", "announced": "VBD", "hosted": "VBD",
           "signed": "VBD", "left": "VBD", "bought": "VBD", "is": "VBZ", "was": "VBD",
           "will": "MD", "play": "VB", "open": "VB", "he": "PRP", "she": "PRP", "his": "PRP$",
           "her": "PRP$", "-": ":"}
NER_TEMPLATES = [
    "{PER} visited {LOC} on {day} .",
    "{PER} , a {profession} from {LOC} , joined {ORG} in {month} .",
    "{ORG} opened a new shop in {LOC} .",
    "{ORG} said its {product} sales rose {n} percent in {month} .",
    "The {MISC_FEST} drew {n} visitors to {LOC} .",
    "{PER} won the {MISC_PRIZE} prize for {pos} work on {MISC_ADJ} {industry} .",
    "{ORG_TEAM} beat {ORG_TEAM} {n2} - {m2} in {LOC} on {day} .",
    "{ORG_TEAM} {ORG_TEAM} {n2} {m2}",
    "{PER} met {PER} at the {ORG} office in {LOC} .",
    "{LOC} lies on the {LOC_RIVER} , {direction} of {LOC} .",
    "{PER} moved from {LOC} to {LOC} after {pos} years with {ORG} .",
    "The {MISC_ADJ} {profession} {PER} signed with {ORG_TEAM} .",
    "{ORG} announced a {MISC_ADJ} edition of its {product} .",
    "Shares of {ORG} fell on {day} , {PER} said .",
    "{LOC} will host the {MISC_FEST} in {month} .",
    "{PER} left {ORG} for {ORG} .",
]


def _ner_entity(world, rng, slot):
  """(text, type) of one entity slot."""
  if slot == "PER":
    return world.person()[0], "PER"
  if slot == "LOC":
    return world.town(), "LOC"
  if slot == "LOC_RIVER":
    return world.river()[4:], "LOC"  # "Silvan River", without "the"
  if slot == "ORG":
    return world.brand() + rng.choice(["", " Ltd", " Group"]), "ORG"
  if slot == "ORG_TEAM":
    return "%s %s" % (world.town(), rng.choice(MASCOTS)), "ORG"
  if slot == "MISC_FEST":
    return "%s %s Festival" % (world.town(), cap(rng.choice(FESTIVALS))), "MISC"
  if slot == "MISC_PRIZE":
    return rng.choice(PRIZES), "MISC"
  if slot == "MISC_ADJ":
    return world.town() + "ian", "MISC"
  raise KeyError(slot)


def _ner_sentence(world, rng):
  """[(word, IOB1-to-be chunk type or None)] of one templated sentence."""
  _, pronoun = world.person()
  plain = dict(day=rng.choice(DAYS), month=rng.choice(MONTHS), n=str(rng.randint(2, 90)),
               n2=str(rng.randint(0, 5)), m2=str(rng.randint(0, 5)),
               profession=rng.choice(PROFESSIONS).split()[0], product=rng.choice(PRODUCTS),
               industry=rng.choice(INDUSTRIES), direction=rng.choice(DIRECTIONS),
               pos=possessive(pronoun))
  words = []
  for part in rng.choice(NER_TEMPLATES).split():
    if part.startswith("{") and part[1:-1] not in plain:
      text, kind = _ner_entity(world, rng, part[1:-1])
      words.append([(w, kind) for w in text.split()])
    else:
      words.append([(w, None) for w in part.format(**plain).split()])
  return words


def _iob1_lines(chunks):
  """CoNLL lines of a sentence given as chunks [[(word, type)]]: IOB1 NER tags, POS, chunk."""
  lines, previous_type = [], None
  for chunk in chunks:
    for index, (word, kind) in enumerate(chunk):
      if kind is None:
        tag = "O"
      elif index == 0 and previous_type == kind:
        tag = "B-" + kind  # IOB1: B- only where a chunk follows one of its type
      else:
        tag = "I-" + kind
      if kind:
        pos, phrase = "NNP", "I-NP"
      elif word[0].isdigit():
        pos, phrase = "CD", "I-NP"
      else:
        pos = NER_POS.get(word.lower(), "NN")
        phrase = "O" if pos in (".", ",", ":", "CC", "POS") else (
            "I-PP" if pos in ("IN", "TO") else "I-VP" if pos[:2] in ("VB", "MD") else "I-NP")
      lines.append("%s %s %s %s" % (word, pos, phrase, tag))
    previous_type = chunk[-1][1] if chunk else None
  return lines


def make_conll(rng, num_sentences):
  """A CoNLL-2003 file: documents of 3 to 8 sentences, each after a -DOCSTART- line."""
  out, done = [], 0
  while done < num_sentences:
    world = World(rng)
    out.append("-DOCSTART- -X- -X- O\n\n")
    for _ in range(min(rng.randint(3, 8), num_sentences - done)):
      chunks = _ner_sentence(world, rng)
      chunks[0][0] = (cap(chunks[0][0][0]), chunks[0][0][1])
      out.append("\n".join(_iob1_lines(chunks)) + "\n\n")
      done += 1
  return "".join(out)


# ----------------------------------------------------------------------- main

def build(seed=SEED):
  """{relative path: text} of every generated file."""
  rng = random.Random(seed)
  return {
      "pretraining_corpus.txt": make_corpus(random.Random(rng.random()), 800),
      "mrpc_sample/train.tsv": make_mrpc_split(random.Random(rng.random()), 4000),
      "mrpc_sample/dev.tsv": make_mrpc_split(random.Random(rng.random()), 600),
      "mrpc_sample/test.tsv": make_mrpc_split(random.Random(rng.random()), 400),
      "squad_sample.json": make_squad(random.Random(rng.random()), 40),
      "swag_sample/train.csv": make_swag(random.Random(rng.random()), 400, 0),
      "swag_sample/val.csv": make_swag(random.Random(rng.random()), 100, 400),
      "conll_sample/train.txt": make_conll(random.Random(rng.random()), 400),
      "conll_sample/dev.txt": make_conll(random.Random(rng.random()), 100),
      "conll_sample/test.txt": make_conll(random.Random(rng.random()), 100),
  }


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--out_dir", default=os.path.dirname(os.path.abspath(__file__)))
  args = parser.parse_args()
  for relative, text in build().items():
    path = os.path.join(args.out_dir, relative)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="") as f:
      f.write(text)
    print("wrote %s (%d bytes)" % (path, len(text.encode("utf-8"))))


if __name__ == "__main__":
  main()
