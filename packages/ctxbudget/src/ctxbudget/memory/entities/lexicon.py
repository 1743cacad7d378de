"""The words the built-in entity rules know: common words, titles, kin and roles, name cues.

Plain English lists, kept small and in one place; `ctxbudget.memory.entities.rules` reads them.
A capitalized word in `COMMON` is not a name (``Hey``, ``Thanks``, ``Monday``); a word in
`TITLES` before a name makes it a person (``Dr. Lee``); `KIN` and `ROLES` are what ``my X``
phrases name (``my sister``, ``my boss``, ``our dog``); `PLACE_WORDS` and `ORG_WORDS` ending a
name type it (``Lake Tahoe`` is not, ``Crater Lake`` is a place; ``Acme Inc``, an org).
"""

from __future__ import annotations

__all__ = [
    "COMMON",
    "CONNECTORS",
    "GREETINGS",
    "GROUPS",
    "KIN",
    "MODIFIERS",
    "NOT_POSSESSED",
    "AUTHORED",
    "ORG_CUES",
    "ORG_WORDS",
    "PETS",
    "PERSON_CUES",
    "PLACE_CUES",
    "PLACE_WORDS",
    "TALKED",
    "ROLES",
    "TITLES",
    "WEAK_SUFFIXES",
]


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


COMMON = _words(
    """
    a about above after again against all almost also although always am among an and
    another any anyone anything anyway anyways are around as at away awesome aww
    back bad be because been before being below best better between both but by bye
    can cannot cheers cool could congrats congratulations
    dear definitely did do does doing done down during
    each either else enough especially even ever every everyone everything exactly
    few for from fun
    gonna good goodbye got gotta great guess
    had has have having he hello her here hers herself hey hi him himself his honestly
    hope how however huh
    i if im in indeed instead into is it its itself
    just
    last later let lets like lol look looks lots love
    many may maybe me meanwhile might mine more most much must my myself
    nah namaste near neither never next nice no nobody none nope nor not nothing now
    of off oh ok okay on once one only oops or other others otherwise our ours
    ourselves out over own
    perfect perhaps please plus pretty probably
    quite
    rather really right
    same see seems she should since so some someone something sometimes soon sorry still
    such super sure sweet
    take than thank thanks thanx that thats the their theirs them themselves then there
    these they thing things this those though through thus to today together tomorrow
    tonight too totally true
    uh um under unless until up upon us
    very
    wait was way we well were what whatever when whenever where whether which while who
    whoa whom whose why will with within without woah wonderful wow would
    ya yay yeah yep yes yesterday yet you your yours yourself yourselves yup
    monday tuesday wednesday thursday friday saturday sunday
    january february march april june july august september october november december
    jan feb mar apr jun jul aug sep sept oct nov dec mon tue tues wed thu thur thurs fri sat sun
    spring summer autumn fall winter christmas easter
    am pm ok tv pc usa
    i'm i'd i've i'll don't can't won't isn't aren't wasn't weren't didn't doesn't couldn't
    wouldn't shouldn't haven't hasn't hadn't you're you've you'll you'd we're we've we'll
    we'd they're they've they'll they'd he'd she'd ain't y'all gotcha omg btw
    absolutely agree amazing anyway appreciate beautiful believe bet catch check cherish
    congrats enjoy excited exciting fantastic feel feeling glad go going guess hang happy
    hard haha hold hug incredible interesting keep know lately let little long looking lovely
    lucky make means miss need nice proud remember reminds sad said seem sounds stay talk
    tell think thinking thought wanna want wish woohoo yikes aw ah ahh ooh hmm hm ugh oof
    phew yum yup wow whoa hooray
    """
)
"""Capitalized at a sentence start, in a greeting or a date, but not names (case-folded)."""

GREETINGS = _words(
    "hey hi hello thanks thank wow oh yeah yes no ok okay bye dear congrats congratulations "
    "sorry please well so yay aww omg lol haha hah ah awesome cool great nice"
)
"""Words that go before a name without being part of it: ``Hey Mel``, ``Thanks Caroline``."""

TITLES = _words(
    "dr doctor mr mrs ms miss mx prof professor sir dame lady lord madam madame aunt auntie "
    "uncle grandma grandpa granny nana coach captain capt officer rev reverend father sister "
    "brother saint st judge president senator mayor"
)
"""Words that make the capitalized name after them a person (``Dr. Lee``, ``Aunt May``)."""

KIN = _words(
    "mother mom mum mama mommy father dad daddy papa parents parent sister sis brother bro "
    "sibling siblings wife husband spouse partner son daughter kid kids child children baby "
    "grandma grandmother grandpa grandfather granddaughter grandson grandparents aunt uncle "
    "cousin niece nephew fiance fiancé fiancee fiancée boyfriend girlfriend friend friends "
    "bestie bff stepmom stepdad stepsister stepbrother twin family"
)
"""Kin a ``my X`` phrase names (a person)."""

ROLES = _words(
    "boss manager colleague coworker co-worker teammate mentor mentee teacher tutor student "
    "doctor dentist therapist counselor counsellor coach trainer landlord landlady neighbor "
    "neighbour roommate flatmate classmate client lawyer accountant assistant doctor nurse "
    "vet pastor"
)
"""Roles a ``my X`` phrase names (a person)."""

PETS = _words("dog dogs puppy pup cat cats kitten pet pets horse bird parrot rabbit bunny fish")
"""Animals a ``my X`` phrase names (type "other")."""

GROUPS = _words(
    "family friends kids children parents siblings grandparents cousins pets dogs cats twins "
    "folks team crew gang"
)
"""Kin and roles that name a group: never the alias of one person (``my family``)."""

MODIFIERS = _words(
    "little big younger older elder eldest oldest youngest best new old step twin baby late "
    "ex dear sweet favorite favourite first second"
)
"""Words allowed between ``my`` and the kin or role: ``my little sister``."""

NOT_POSSESSED = _words(
    "a an the been being gone going got gonna done doing had has have not no so very really "
    "just also always never still here there now then too only even quite pretty all about "
    "in on at to for with from up out off over back into such that this what which who how "
    "when where why and or but if as by of is was were be are it"
)
"""Words after ``Name's`` that show the ``'s`` is "is" or "has", not a possessive."""

CONNECTORS = _words("of the de da del della di do dos das du van von der den la le bin al y")
"""Lower-case words that may sit inside a name: ``Bank of America``, ``Vincent van Gogh``."""

PLACE_WORDS = _words(
    "city town village street st avenue ave road rd boulevard park lake river mountain "
    "mountains mount beach island islands county state province bay valley hill hills falls "
    "canyon forest desert coast harbor harbour square bridge airport station country"
)
"""Last words of a place name (case-folded)."""

ORG_WORDS = _words(
    "inc inc. corp corporation co company llc ltd limited plc gmbh group university college "
    "school academy institute hospital clinic bank foundation agency association church club "
    "center centre society museum library council department ministry studio studios labs "
    "team league union"
)
"""Last words of an organization's name (case-folded)."""

PLACE_CUES = _words("in near from visited visit visiting moved move moving flew fly around")
"""Words before a name that make it a place (``moved to`` is read as ``moved``)."""

ORG_CUES = _words("joined hired employed interned interning")
"""Words before a name that make it an organization (``works at``/``for`` too)."""

PERSON_CUES = _words("met meet meets meeting married marry marrying dating dated hugged texted")
"""Words before a name that make it a person (``written by``, ``talked with`` too)."""

AUTHORED = _words(
    "founded cofounded co-founded written directed painted authored composed created invented "
    "discovered designed sung"
)
"""Words before ``by`` that make the name after it a person (``founded by Priya Raman``)."""

TALKED = _words("talked talking spoke speaking chatted chatting argued arguing")
"""Words before ``with`` or ``to`` that make the name after it a person."""

WEAK_SUFFIXES = (
    "ing",
    "ed",
    "tion",
    "sion",
    "ness",
    "ment",
    "ful",
    "ous",
    "able",
    "ity",
    "ism",
    "ally",
    "ely",
    "tly",
    "bly",
    "fully",
    "ics",
    "ure",
    "ies",
)
"""A capitalized word that only starts a sentence and ends like this is not taken as a name."""
