"""The `ordered` corpus: a generated positive control for sentence-order prediction (SOP).

Real corpora cannot tell a weak SOP result apart from a bug: maybe the text's order was hard to read,
maybe the model never learned. This corpus makes the answer known. Each document keeps ONE topic (a
kitchen, a voyage, a forge, ... 44 of them, each with its own role, nouns and counted thing; about
1,100 distinct words in all) and tells a small story whose order can be read from the text alone:
every adjacent pair of sentences carries at least one cue that says which came first, so a swapped
A/B is decidable and a small ALBERT trained with SOP should reach 90%+. Next-sentence prediction ("is
B from the same document?") is solvable from the topic alone, since a random B almost always comes
from another topic: the contrast the course draws between the two tasks.

The cues, mixed within a document and worded from several templates with random topic words:
  intro   a thing or person appears with "a"/"an" ("a cook named Ada", "a kettle") before it is
          referred to with "the" or bare ("the kettle", "Ada");
  count   a count that only grows ("..., and by then there were five dumplings");
  time    a time of day that only advances (at dawn, at noon, late in the afternoon, at midnight);
  marker  the first sentence opens with "First,", "To begin," or "At the start,", the last with
          "Finally,", "At last," or "In the end," (the middle ones with "Then,", "Later," ... in any
          order, or nothing).
Every pair of neighbours gets intro, count or time; markers come on top. Sentence lengths are drawn
independently of position (only the first sentence, which introduces the person, runs about a word
longer), so the length of a run says next to nothing about its place.

`ordered_documents(split, num_documents, seed)` generates a split: seeded, deterministic, no network,
standard library only; the 6,000 training documents (about 740k words) take about a second. Document
i of a split depends only on (split, seed, i), so a shorter request is a prefix of a longer one, and
each split has its own seeds, so the splits share no document.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from ..sentences import Document, check_split

__all__ = ["DEFAULT_SIZES", "MAX_SENTENCES", "MIN_SENTENCES", "NAME", "TIMES_OF_DAY", "TOPICS", "Topic",
           "ordered_documents", "topic_of"]

NAME = "ordered"
DEFAULT_SIZES = {"train": 6000, "valid": 500, "test": 500}     # documents per split
MIN_SENTENCES, MAX_SENTENCES = 5, 12                           # per document


@dataclass(frozen=True)
class Topic:
    """One topic's vocabulary: its words appear in no other topic (the distinctive ones: role,
    counted and nouns) and a document uses one topic only."""

    name: str
    role: str                       # the person: "a cook named Ada", later "the cook"
    place: str                      # "in the kitchen"
    counted: str                    # plural noun whose count only grows: "dumplings"
    nouns: tuple[str, ...]          # things introduced with "a"/"an", then referred to with "the"
    verbs: tuple[str, ...]          # past tense, done to the nouns

    @property
    def words(self) -> frozenset[str]:
        """The distinctive words: role, counted noun and nouns (no other topic uses them)."""
        return frozenset((self.role, self.counted, *self.nouns))


# name | role | place | counted | nouns | verbs
_TOPIC_TABLE = """
kitchen | cook | in the kitchen | dumplings | kettle ladle skillet colander apron whisk platter teapot \
saucepan cleaver grater casserole | stirred rinsed heated wiped chopped scrubbed
voyage | sailor | on the ship | barrels | compass anchor helm lantern sail mast hammock spyglass rope \
logbook porthole capstan | hoisted coiled stowed lashed swabbed furled
garden | gardener | in the garden | seedlings | spade rake hose wheelbarrow birdhouse sprinkler shears \
hedge birdbath greenhouse flowerpot lawnmower | watered trimmed tidied staked planted mowed
workshop | carpenter | in the workshop | planks | hammer chisel saw lathe workbench clamp mallet sawhorse \
drill vise dowel toolbox | sanded measured glued nailed planed sawed
library | librarian | in the library | volumes | catalogue index bookcase atlas encyclopedia dictionary \
bookmark manuscript periodical footstool lectern microfilm | shelved sorted dusted labelled borrowed \
repaired
farm | farmer | on the farm | bales | tractor plough barn pitchfork trough scarecrow fence silo harrow \
gate haystack henhouse | hauled mended greased painted ploughed harvested
bakery | baker | in the bakery | loaves | oven baguette croissant muffin pretzel scone bun tart peel \
breadboard doughnut bagel | glazed baked sliced floured kneaded iced
forge | blacksmith | at the forge | nails | anvil bellows tongs furnace poker hook grindstone ingot hinge \
horseshoe rivet bracket | hammered forged tempered quenched welded filed
pottery | potter | in the pottery | bowls | kiln wheel jug urn pitcher crock vase mug slab wedge saucer \
tile | shaped fired painted smoothed moulded etched
orchard | grower | in the orchard | apples | ladder crate pear plum cherry peach quince apricot sapling \
graft fig nectarine | picked pruned sorted packed gathered grafted
stable | groom | in the stable | carrots | saddle bridle stirrup halter pony mare foal currycomb nosebag \
hayrack gelding horsebox | brushed led fed cleaned groomed shod
harbor | fisherman | at the harbor | crabs | net trawler buoy lobster pier dinghy oar creel tackle winch \
mooring jetty | mended tied landed rowed moored netted
laboratory | chemist | in the laboratory | samples | beaker flask burner pipette microscope centrifuge \
balance thermometer funnel specimen retort burette | measured heated labelled weighed titrated diluted
classroom | teacher | in the classroom | essays | blackboard eraser globe ruler textbook notebook satchel \
pencil calendar register protractor abacus | marked collected handed opened taught graded
hospital | nurse | in the ward | patients | stretcher bandage syringe stethoscope splint clipboard \
wheelchair pillow gurney drip crutch plaster | sterilised wrapped changed adjusted bandaged monitored
campsite | camper | at the campsite | tents | tarp canteen torch hatchet stove backpack cooler thermos \
groundsheet campfire penknife billycan | packed unrolled carried lit pitched zipped
mine | miner | down the mine | wagons | pickaxe helmet lamp tunnel nugget trolley crowbar hoist detonator \
canary shaft pitprop | hauled cleared loaded lit drilled blasted
mill | miller | at the mill | sacks | millstone waterwheel hopper sluice chute scoop grindwheel flour \
granary weir bushel axle | ground cleaned filled turned milled sifted
apiary | beekeeper | at the apiary | jars | hive smoker veil frame queen drone swarm extractor honeycomb \
wasp bumblebee skep | opened smoked lifted inspected calmed capped
vineyard | vintner | in the vineyard | casks | vine corkscrew decanter cork vat cellar goblet terrace \
grape bottle trellis winepress | pressed tasted poured corked bottled harvested
tailor | tailor | in the fitting room | buttons | thimble needle spool mannequin jacket waistcoat collar \
cuff pincushion hanger zipper lapel | stitched pressed hemmed pinned tailored ironed
printshop | printer | in the print room | posters | press roller typeface stencil proof guillotine ream \
inkwell broadsheet pamphlet woodcut platen | inked trimmed folded cleaned printed proofread
observatory | astronomer | at the observatory | comets | telescope lens dome eyepiece tripod sextant \
planisphere almanac meteor nebula constellation orrery | aimed focused adjusted polished observed charted
theater | actor | on the stage | costumes | curtain spotlight prop script mask wig trapdoor backdrop \
dagger crown footlight playbill | rehearsed raised adjusted carried performed directed
market | vendor | at the market | melons | stall awning scale cart cashbox pumpkin cabbage turnip sign \
umbrella radish barrow | arranged weighed stacked sold bartered priced
building | builder | on the building site | bricks | crane scaffold girder bulldozer excavator jackhammer \
cement hardhat blueprint foundation rebar cornerstone | lifted secured measured inspected laid levelled
railway | stationmaster | at the station | trains | platform signal locomotive ticket whistle turntable \
timetable lever buffer coupling carriage semaphore | checked coupled cleaned oiled signalled shunted
post | postmaster | at the post office | letters | parcel envelope stamp postcard mailbag postbox telegram \
twine pigeonhole receipt postmark inkpad | sorted stamped weighed sealed posted delivered
museum | curator | in the museum | exhibits | fossil statue tapestry mosaic sarcophagus relic amulet \
plaque skeleton pedestal diorama artefact | catalogued displayed polished labelled restored exhibited
lighthouse | keeper | in the lighthouse | flares | beacon foghorn reflector staircase gallery barometer \
oilcan railing lightbulb shutter lamproom weathervane | lit wound polished trimmed cranked scraped
dairy | cheesemaker | in the dairy | cheeses | churn pail cheesecloth cow calf heifer milkcan skimmer \
separator stool yoke creamer | churned scrubbed filled carried skimmed curdled
florist | florist | in the flower shop | bouquets | marigold tulip lily orchid daisy peony carnation \
wreath posy ribbon fern hydrangea | arranged trimmed wrapped watered snipped bundled
orchestra | conductor | in the concert hall | musicians | baton violin cello trumpet drum flute harp \
metronome podium piano oboe tuba | tuned played polished lifted conducted strummed
studio | painter | in the studio | portraits | easel palette canvas paintbrush smock sketchbook crayon \
pastel portfolio rag charcoal etching | cleaned propped turned studied primed shaded
glassworks | glassblower | in the glassworks | marbles | blowpipe crucible punty paddle bead prism \
paperweight pane bauble tumbler chandelier mirror | shaped cooled polished turned blew annealed
weaving | weaver | in the weaving shed | blankets | loom shuttle spindle skein heddle treadle fleece \
distaff carder tassel bobbin yarn | spun wove carded tightened dyed threaded
mountain | climber | on the mountain | ledges | crampon carabiner harness rucksack altimeter headlamp \
cairn crevasse glacier icefall piton ridge | clipped tightened coiled checked climbed belayed
dig | archaeologist | at the dig | trenches | trowel arrowhead coin skull tomb amphora brooch sifter mound \
scarab potsherd figurine | uncovered sketched cleaned recorded excavated dated
bicycle | mechanic | in the bike shop | punctures | wrench pump chain sprocket pedal handlebar bell \
mudguard kickstand derailleur tyre saddlebag | oiled tightened straightened pumped patched trued
clocks | clockmaker | in the clock shop | cogs | pendulum mainspring escapement dial loupe cuckoo \
hourglass sundial stopwatch chime flywheel bezel | wound oiled cleaned assembled calibrated regulated
boatyard | shipwright | in the boatyard | hulls | keel rudder slipway transom gunwale tiller propeller \
davit bowsprit ballast bulkhead sternpost | caulked tarred varnished fitted planked launched
inn | innkeeper | at the inn | guests | tankard hearth quilt mattress keg candlestick suitcase wardrobe \
doormat guestbook bedspread barstool | swept aired polished carried served welcomed
firehouse | firefighter | at the fire station | calls | extinguisher hydrant axe siren engine pole \
respirator nozzle bunk sandbag firetruck bucket | polished tested rolled checked hosed sounded
pharmacy | pharmacist | in the pharmacy | remedies | mortar pestle vial tincture ointment prescription \
dropper salve poultice lozenge capsule inhaler | mixed ground labelled measured dispensed crushed
"""


def _parse_topics(table: str) -> tuple[Topic, ...]:
    topics = []
    for line in table.strip().splitlines():
        name, role, place, counted, nouns, verbs = (field.strip() for field in line.split("|"))
        topics.append(Topic(name, role, place, counted, tuple(nouns.split()), tuple(verbs.split())))
    return tuple(topics)


TOPICS = _parse_topics(_TOPIC_TABLE)
_TOPIC_BY_NAME = {t.name: t for t in TOPICS}

# Times of day in order; each slot has two wordings. A document's timed sentences take increasing slots.
TIMES_OF_DAY = (("at dawn", "at first light"), ("at sunrise", "as the sun rose"),
                ("at breakfast", "over breakfast"), ("by mid-morning", "in the middle of the morning"),
                ("at noon", "at midday"), ("early in the afternoon", "just after lunch"),
                ("late in the afternoon", "at teatime"), ("at sunset", "as the sun set"),
                ("in the evening", "at dusk"), ("at supper", "after supper"),
                ("late at night", "long after dark"), ("at midnight", "around midnight"))
_NUMBERS = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
            "sixteen seventeen eighteen nineteen twenty").split()
_COUNTS = range(2, 21)                                          # "two" .. "twenty"

_NAMES = ("Ada Ben Cora Dev Elin Finn Greta Hugo Iris Jonas Kira Leo Mara Nils Olga Pablo Rosa Sami Tove "
          "Umar Vera Wes Yara Zeno Anya Boris Clara Dario Edith Felix Gwen Hana Ivo Juno Karl Lena Milo "
          "Nora Otto Pia Abe Bea Cyril Dina Emil Fay Gus Hilde Igor Jada Kofi Lars Mina Ned Odile Pavel "
          "Quinn Rhea Saul Tess Ulla Viktor Wanda Xavi Yusuf Zara Alma Bruno Cleo Dmitri Esme Franz Gia "
          "Hal Ines Jamal").split()
_FIRST_MARKERS = ("First,", "To begin,", "At the start,")
_LAST_MARKERS = ("Finally,", "At last,", "In the end,")
_MIDDLE_MARKERS = ("Then,", "Next,", "After that,", "Later,", "Soon after,")
_INTRODUCING = ("{a} {role} named {name}", "{a} {role} called {name}")
_FINDING_VERBS = ("found", "brought out", "noticed", "unpacked", "picked up", "fetched", "spotted",
                  "came across")
_HANDLING_VERBS = ("checked", "moved", "carried", "inspected", "tidied", "examined")
_IDLE_CLAUSES = ("got to work", "set to work", "looked around", "waited", "paused", "looked things over")
_ADVERBS = ("slowly", "quickly", "quietly", "carefully", "patiently", "gently", "calmly", "steadily",
            "briskly", "cheerfully", "neatly")
_MANNERS = ("as usual", "without any fuss", "in silence", "with steady hands", "while humming softly",
            "as planned", "without hurrying", "in good spirits", "with some effort", "out of habit",
            "for good measure", "by hand")
_COUNT_OPENERS = ("with {n} {counted} ready,", "with {n} {counted} done,", "having counted {n} {counted},")
_COUNT_CLOSERS = (", and by then there were {n} {counted}", ", and now there were {n} {counted}",
                  ", which made {n} {counted} in all", ", bringing the total to {n} {counted}")
_PAIR_CUES = ("intro", "count", "time")
_EXTRA_CUE_PROBABILITY = 0.2        # a sentence also carries time (or count) that its neighbours need not


def _article(noun: str) -> str:
    return "an" if noun[0] in "aeiou" or noun.startswith("hour") else "a"


def _pair_cues(rng: random.Random, num_pairs: int, num_nouns: int) -> list[str]:
    """The cue each pair of neighbours carries: drawn from a per-document palette of the three kinds;
    intro needs a fresh noun, so it gives way to count or time when the topic's nouns run out."""
    palette = [cue for cue in _PAIR_CUES if rng.random() < 0.6] or [rng.choice(_PAIR_CUES)]
    cues, intros = [], 0
    for _ in range(num_pairs):
        cue = rng.choice(palette)
        if cue == "intro" and intros == num_nouns:
            cue = rng.choice(("count", "time"))
        intros += cue == "intro"
        cues.append(cue)
    return cues


def _clause(rng: random.Random, topic: Topic, new: str | None, ref: str | None) -> str:
    """What the person does: finds `new` ("a"/"an"), handles `ref` ("the"), both, or neither."""
    finding, verb = rng.choice(_FINDING_VERBS), rng.choice(topic.verbs + _HANDLING_VERBS)
    a_new = f"{_article(new)} {new}" if new else ""
    if new and ref:
        return rng.choice((f"{verb} the {ref} and {finding} {a_new}", f"{finding} {a_new} next to the {ref}",
                           f"set the {ref} beside {a_new}"))
    if new:
        return f"{finding} {a_new}"
    return f"{verb} the {ref}" if ref else rng.choice(_IDLE_CLAUSES)


def _marker(rng: random.Random, i: int, n: int) -> str:
    if i == 0:
        return rng.choice(_FIRST_MARKERS)
    if i == n - 1:
        return rng.choice(_LAST_MARKERS)
    return rng.choice(_MIDDLE_MARKERS) if rng.random() < 0.7 else ""


def _document(rng: random.Random, title_prefix: str) -> Document:
    """One story: a topic, a person and a run of sentences whose order the cues fix."""
    topic = rng.choice(TOPICS)
    n = rng.randint(MIN_SENTENCES, MAX_SENTENCES)
    pair_cues = _pair_cues(rng, n - 1, len(topic.nouns))
    carries = {kind: [kind in pair_cues[max(i - 1, 0):i + 1] or rng.random() < _EXTRA_CUE_PROBABILITY
                      for i in range(n)] for kind in ("time", "count")}
    times = iter(sorted(rng.sample(range(len(TIMES_OF_DAY)), sum(carries["time"]))))
    counts = iter(sorted(rng.sample(_COUNTS, sum(carries["count"]))))
    fresh = rng.sample(topic.nouns, len(topic.nouns))          # nouns in the order they are introduced
    reserved = pair_cues.count("intro")                        # fresh nouns the intro pairs still need
    name = rng.choice(_NAMES)
    known: list[str] = []                                      # nouns introduced so far
    sentences = []
    for i in range(n):
        # the objects: a noun introduced here ("a"), one introduced before ("the")
        ref = known[-1] if i > 0 and pair_cues[i - 1] == "intro" else None
        if ref is None and known and rng.random() < 0.6:
            ref = rng.choice(known)
        new = None
        if i < n - 1 and pair_cues[i] == "intro":
            new, reserved = fresh.pop(), reserved - 1
        elif ref is None and len(fresh) > reserved and rng.random() < 0.5:
            new = fresh.pop()
        clause = _clause(rng, topic, new, ref)
        idle = clause in _IDLE_CLAUSES
        # the person: introduced in the first sentence, then by name or role (role when idle, so
        # that every sentence holds a word of its topic)
        if i == 0:
            agent = rng.choice(_INTRODUCING).format(a=_article(topic.role), role=topic.role, name=name)
        else:
            agent = f"the {topic.role}" if idle else rng.choice((name, name, f"the {topic.role}"))
        # the cues: marker, then time and count as openers or closers
        openers, closers = [_marker(rng, i, n)], ["", ""]
        if carries["time"][i]:
            time = rng.choice(TIMES_OF_DAY[next(times)])
            if rng.random() < 0.5:
                openers.append(time + ",")
            else:
                closers[0] = " " + time
        if carries["count"][i]:
            number = _NUMBERS[next(counts)]
            if rng.random() < 0.3:
                openers.append(rng.choice(_COUNT_OPENERS).format(n=number, counted=topic.counted))
            else:
                closers[1] = rng.choice(_COUNT_CLOSERS).format(n=number, counted=topic.counted)
        # optional words, added until the sentence reaches a length drawn independently of its place
        # (an idle clause always says where)
        others = [k for k in known if k != ref]
        fillers = [rng.choice(_MANNERS)] + ([f"beside the {rng.choice(others)}"] if others else [])
        rng.shuffle(fillers)
        fillers.insert(0, rng.choice(_ADVERBS))
        fillers.insert(0 if idle else rng.randrange(len(fillers) + 1), topic.place)
        words = [*openers, agent, clause, *fillers[:idle]]
        length, target = sum(len(part.split()) for part in words + closers), rng.randint(9, 17)
        for filler in fillers[idle:]:
            if length >= target:
                break
            words.append(filler)
            length += len(filler.split())
        text = " ".join(filter(None, words)) + "".join(closers)
        sentences.append(text[0].upper() + text[1:] + ".")
        if new:
            known.append(new)
    return Document(f"{title_prefix} ({topic.name})", tuple(sentences))


def ordered_documents(split: str, num_documents: int | None = None, seed: int = 0) -> list[Document]:
    """The generated documents of one split ("train", "valid" or "test"), DEFAULT_SIZES[split] of them
    unless num_documents says otherwise. Titles read "ordered:train:000123 (garden)".

    Deterministic: document i depends only on (split, seed, i), so fewer documents are a prefix of
    more, and the splits (their own seeds) share no document.
    """
    check_split(split)
    count = DEFAULT_SIZES[split] if num_documents is None else num_documents
    if count < 0:
        raise ValueError(f"num_documents must be >= 0, got {count}")
    return [_document(random.Random(f"{NAME}:{split}:{seed}:{i}"), f"{NAME}:{split}:{i:06d}")
            for i in range(count)]


def topic_of(document: Document) -> Topic:
    """The topic of a generated document, read from its title."""
    name = document.title.rsplit("(", 1)[-1].rstrip(")")
    if name not in _TOPIC_BY_NAME:
        raise ValueError(f"{document.title!r} is not a title of the {NAME} corpus")
    return _TOPIC_BY_NAME[name]
