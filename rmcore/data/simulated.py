"""The simulated rating set that ships with matchrm (the demo's default data).

Generative model (all draws from ``numpy.random.default_rng(seed)``; i = prompt, j = response).

Prompt features, drawn INDEPENDENTLY of each other (each balanced over prompts by its own
permutation; the constraint subset is uniform given its size)::

    topic_i        one of 30 TOPICS                       -> the subject and the task named in the question
    task_i         one of TASK_TYPES (how_to, mistakes, plan, troubleshoot) -> the question's wording
    constraints_i  0, 1 or 2 of CONSTRAINTS (list, brief, example, summary, beginner), stated as
                   sentences after the question ("Please answer as a numbered list.")
    length_i       0, 1 or 2 context sentences before the question ("My schedule is quite busy.")

Prompt offset (the between-prompt part of helpfulness)::

    a_f(level) ~ N(0, 1) per level of each feature f    (drawn once per seed: untuned)
    z_vis_i    = standardised sum over the 4 features of standardise(a_f(f_i))  (visible in the text)
    z_hid_i    ~ N(0, 1), stratified normal quantiles    (hidden prompt effect)
    u_i        = sd_u * (sqrt(v) z_vis_i + sqrt(1-v) z_hid_i),  v = prompt_visibility

Response features: each response is written FOR its prompt, imperfectly::

    on_topic_ij    ~ Bernoulli(0.85)    else it answers another topic (a misread request)
    mode_ij        = task_i with probability 0.7, else another task type (answers the wrong question)
    marker_ij[c]   ~ Bernoulli(0.6) for each constraint c the prompt states, Bernoulli(0.2) for the
                   others (list layout, brief layout, an example, a closing summary, a beginner note)
    level_ij       = cut(N(0,1) at -0.85, 0, 0.85) in {0..3}: how many specific tips it gives

Answer quality of a response text for a prompt P (``answer_quality``; a rater's rubric)::

    r(P, y) = [topic(y) == topic(P)] * (1 + level(y) + [mode(y) == task(P)] + 0.5 * #(markers(y) & constraints(P)))

An off-topic answer is worth nothing whatever its other merits; on topic, each specific tip, answering
the task asked and each honoured constraint adds to it. Because r depends on the pair (prompt,
response), moving a response to another prompt changes its quality: the match effect a reward
model can learn. Helpfulness::

    q_ij  = sd_q * (r_ij - E[r | prompt features of i]) / SD(r - E[r | ...])   (within-prompt quality)
    e_ij  ~ N(0, rater_noise_sd^2)                                             (rater noise)
    helpfulness_ij = clip(round(2 + u_i + q_ij + e_ij), 0, 4)

E[r | prompt] is the rubric's expectation under the response draws above (it depends on the number
of stated constraints only); subtracting it keeps every prompt-level effect in u_i, so the
``human_share`` knob alone sets the between-prompt share. Variance budget: with T = total_sd^2 + 1/12
(1/12 = rounding variance), sd_q^2 = (1 - human_share) T - 1/12 - rater_noise_sd^2 and sd_u^2 =
human_share T as a start; sd_u is then fine-tuned by bisection on the same draws so that the
realised ICC(1) of the rounded, clipped ratings (``rmcore.data.variance.icc1``) equals
``human_share`` (to ~0.01: rounding granularity). human_share = 0.3 is HelpSteer-like, 0 is
HelpSteer2-like (its human share is about 0).

Text. The response's features are all visible: its tips come from the topic it answers; the mode
sets a header and the phrasing of each tip ("First, ...", "A common mistake is forgetting to ...",
"In week one, ...", "First, make sure you ..."); level 0 gives only vague hedging; the markers add a
numbered layout, a compact header-free layout, "For example, ...", "In short, ..." or "New to this? ...".
Multi-turn prompts (``multi_turn_fraction``) carry an earlier exchange on the same
topic. Every prompt conversation, every last user turn and every response text is unique within a
set (surface choices are redrawn on a collision), so splitting a set by prompt gives disjoint texts.

Other attributes (ints 0-4): correctness = clip(round(2 + u + q + N(0, 0.6^2))); coherence =
clip(round(1 + level + N(0, 0.5^2))); complexity = clip(round(1 + 0.5 level + 0.5 #constraints +
N(0, 0.5^2))); verbosity = clip(round(words / 12 + N(0, 0.4^2))).

Preference labels (``with_preferences``): for every within-prompt pair with different helpfulness
ratings, the label follows the rating order with probability ``label_agreement`` and is flipped
otherwise; strength = |rating gap|; meta records ``agrees_with_ratings``.

Ground truth for audits is kept in meta: PromptRecord.meta {"topic", "task_type", "constraints",
"length", "prompt_offset", "visible_offset"}; Response.meta {"topic", "mode", "markers", "level",
"answer_quality", "quality", "latent"}.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from itertools import combinations
from typing import Any

import numpy as np
from scipy.stats import norm

from rmcore.data.schema import DEFAULT_ATTRIBUTES, Preference, PromptRecord, RatingSet, Response
from rmcore.data.variance import icc1
from rmcore.settings.fields import bounded

ROUNDING_VAR = 1.0 / 12.0
# Response draws (see module doc). Fixed by the model, not knobs: they describe how well a typical
# writer answers a request, and E[r | prompt] below is computed from them.
P_ON_TOPIC = 0.85
P_RIGHT_TASK = 0.7
P_MARKER_ASKED = 0.6
P_MARKER_UNASKED = 0.2
LEVEL_CUTS = (-0.85, 0.0, 0.85)
W_TASK = 1.0
W_CONSTRAINT = 0.5


@dataclass
class SimulationSettings:
    n_prompts: int = bounded(600, ge=2)
    responses_per_prompt: int = bounded(4, ge=2)
    human_share: float = bounded(0.3, ge=0, le=1)  # target ICC(1) of helpfulness by prompt
    rater_noise_sd: float = bounded(0.5, ge=0)
    total_sd: float = bounded(1.0, gt=0)  # SD of the latent helpfulness before rounding
    # share of the prompt-offset variance visible in the prompt text
    prompt_visibility: float = bounded(0.6, ge=0, le=1)
    multi_turn_fraction: float = bounded(0.2, ge=0, le=1)
    label_agreement: float = bounded(0.9, ge=0, le=1)
    with_preferences: bool = True
    seed: int = bounded(0, ge=0)

    def variance_budget(self) -> tuple[float, float]:
        """(sd_u, sd_q): prompt-offset and response-quality SDs implied by the knobs."""
        total = self.total_sd ** 2 + ROUNDING_VAR
        var_u = self.human_share * total
        var_q = (1.0 - self.human_share) * total - ROUNDING_VAR - self.rater_noise_sd ** 2
        if var_q < 0.02:
            raise ValueError(
                f"human_share={self.human_share} with rater_noise_sd={self.rater_noise_sd} leaves no "
                f"within-prompt quality variance; lower one of them or raise total_sd")
        return math.sqrt(var_u), math.sqrt(var_q)

    def validate(self) -> None:
        if self.n_prompts < 2 or self.responses_per_prompt < 2:
            raise ValueError("need n_prompts >= 2 and responses_per_prompt >= 2")
        for name in ("human_share", "prompt_visibility", "multi_turn_fraction", "label_agreement"):
            x = getattr(self, name)
            if not 0.0 <= x <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {x}")
        if self.rater_noise_sd < 0 or self.total_sd <= 0:
            raise ValueError("rater_noise_sd must be >= 0 and total_sd > 0")
        self.variance_budget()


# --- text material ------------------------------------------------------------------------------
# (subject, task, four tips as imperative verb phrases, summary). Imperative tips fit every answer
# mode: "First, {tip}", "forgetting to {tip}", "In week one, {tip}", "make sure you {tip}".
TOPICS: list[tuple[str, str, tuple[str, str, str, str], str]] = [
    ("sourdough bread", "bake sourdough bread",
     ("feed the starter twelve hours before mixing", "use about two percent salt by flour weight",
      "let the dough proof overnight in the fridge", "bake in a preheated Dutch oven with the lid on"),
     "an active starter and a long cold proof give the best loaf"),
    ("houseplant watering", "water houseplants",
     ("check the top inch of soil with a finger first", "water less in winter when growth slows",
      "use pots with drainage holes to prevent root rot", "give succulents far less water than ferns"),
     "water when the soil is dry, not on a fixed calendar"),
    ("marathon training", "train for a marathon",
     ("build weekly mileage by about ten percent", "do one long slow run each week",
      "taper for two to three weeks before race day", "practice fueling with gels during long runs"),
     "gradual mileage and a proper taper matter most"),
    ("Python lists", "sort a list in Python",
     ("call sorted to get a new list and keep the original", "call list.sort to sort in place",
      "pass key=len to sort strings by length", "use reverse=True for descending order"),
     "use sorted for a copy and list.sort to change the list itself"),
    ("credit scores", "improve a credit score",
     ("pay every bill on time", "keep card utilization under thirty percent",
      "avoid opening many new accounts at once", "check your report for errors and dispute them"),
     "on-time payments and low utilization raise the score fastest"),
    ("car tire pressure", "check car tire pressure",
     ("measure when the tires are cold", "find the recommended psi on the driver door sticker",
      "use a gauge on each valve stem", "check monthly and before long trips"),
     "cold tires, the door-sticker psi and a monthly check"),
    ("job interviews", "prepare for a job interview",
     ("research the company products and recent news", "prepare STAR stories for behavioral questions",
      "practice answers aloud with a friend", "bring two thoughtful questions for the interviewer"),
     "research, practiced stories and good questions win interviews"),
    ("exam revision", "study for an exam",
     ("space study sessions over several days", "test yourself instead of rereading notes",
      "sleep well the night before", "work through past papers under time limits"),
     "spaced practice and self-testing beat cramming"),
    ("coffee brewing", "brew pour-over coffee",
     ("use one gram of coffee to sixteen of water", "heat the water to around ninety-four degrees",
      "grind medium-fine just before brewing", "let the grounds bloom for thirty seconds"),
     "fresh grind, the right ratio and a bloom make a clean cup"),
    ("sleep hygiene", "sleep better",
     ("keep the same wake time every day", "avoid caffeine after early afternoon",
      "keep the bedroom dark and cool", "put screens away an hour before bed"),
     "a fixed schedule and a dark cool room help most"),
    ("SQL joins", "join two tables in SQL",
     ("use an inner join to keep only matching rows", "use a left join to keep every left row",
      "join on indexed key columns for speed", "alias tables to keep queries readable"),
     "pick inner or left join depending on which rows must survive"),
    ("budgeting", "make a monthly budget",
     ("list take-home income and fixed bills first", "try the fifty thirty twenty split",
      "track spending in categories for a month", "automate a transfer to savings on payday"),
     "know your income, track spending and save automatically"),
    ("dog training", "teach a dog to sit",
     ("hold a treat above the nose and move it back", "say sit once as the hips go down",
      "reward within two seconds", "keep sessions to about five minutes"),
     "lure, mark and reward quickly in short sessions"),
    ("git branches", "use git branches",
     ("create a branch with git switch -c", "commit small focused changes",
      "rebase on main to keep history linear", "open a pull request before merging"),
     "branch per feature, commit small, review before merge"),
    ("public speaking", "give a confident talk",
     ("open with a story or a surprising fact", "limit each slide to one idea",
      "rehearse the talk out loud three times", "pause instead of saying um"),
     "a strong opening, simple slides and rehearsal build confidence"),
    ("tomato gardening", "grow tomatoes",
     ("plant in full sun with six to eight hours of light", "water deeply at the base, not the leaves",
      "stake or cage plants early", "pinch suckers on indeterminate varieties"),
     "sun, deep watering and support give healthy tomatoes"),
    ("resume writing", "write a resume",
     ("lead each bullet with a strong action verb", "quantify results with numbers",
      "tailor keywords to the job posting", "keep it to one page early in a career"),
     "tailored, quantified bullets on one page"),
    ("home energy", "cut home energy use",
     ("switch to LED bulbs", "lower the thermostat by one degree",
      "unplug devices on standby", "wash clothes at thirty degrees"),
     "small daily changes add up on the energy bill"),
    ("learning guitar", "learn guitar chords",
     ("start with G, C, D and E minor", "press just behind the fret, not on it",
      "practice switching between two chords for a minute", "play daily for fifteen minutes"),
     "a few open chords and daily switching practice"),
    ("email etiquette", "write a professional email",
     ("use a specific subject line", "state the request in the first two sentences",
      "keep paragraphs short", "close with a clear next step"),
     "clear subject, early request and a defined next step"),
    ("home insulation", "insulate a home",
     ("seal gaps around windows and doors first", "add attic insulation since heat rises",
      "check the recommended R-value for your climate", "insulate hot water pipes"),
     "seal air leaks first, then insulate the attic"),
    ("meal prep", "meal prep for the week",
     ("plan five lunches around two proteins", "cook grains in one big batch",
      "store meals in glass containers for four days", "keep sauces separate so food stays crisp"),
     "plan, batch cook and store safely"),
    ("spreadsheet formulas", "use VLOOKUP in a spreadsheet",
     ("put the lookup key in the first column", "set the last argument to FALSE for an exact match",
      "lock the range with dollar signs before copying", "switch to XLOOKUP to search in any direction"),
     "use exact match and locked ranges, or XLOOKUP"),
    ("bicycle maintenance", "maintain a bicycle",
     ("clean and lube the chain every few hundred kilometers", "check brake pads for wear",
      "keep tires at the pressure printed on the sidewall", "tighten loose bolts to the right torque"),
     "a clean chain, good brakes and correct tire pressure"),
    ("language learning", "learn a new language",
     ("study the thousand most common words first", "use spaced repetition flashcards daily",
      "speak with a tutor or partner each week", "listen to podcasts made for learners"),
     "frequent words, spaced repetition and regular speaking"),
    ("first aid for burns", "treat a minor burn",
     ("cool the burn under running water for twenty minutes", "remove rings before swelling starts",
      "cover loosely with cling film or a clean dressing", "skip butter and ice"),
     "cool running water for twenty minutes, then cover it"),
    ("time management", "manage time better",
     ("list the three most important tasks each morning", "block focused time on the calendar",
      "batch email into two set times", "do any two-minute task at once"),
     "prioritize three tasks and protect focus blocks"),
    ("web debugging", "debug a failing web request",
     ("read the status code first", "treat 4xx codes as client errors such as a wrong URL",
      "check server logs for any 5xx error", "retry with curl to see the raw response"),
     "the status code tells you where to look"),
    ("saving for retirement", "save for retirement",
     ("contribute enough to get the full employer match", "prefer low-cost index funds",
      "raise the savings rate with each pay rise", "start early so compounding can work"),
     "take the match, buy cheap index funds and start early"),
    ("painting a room", "paint a room",
     ("wash walls and patch holes before painting", "apply primer over dark or patched areas",
      "cut in the edges with a brush before rolling", "use two thin coats rather than one thick coat"),
     "prep the walls, prime and roll two thin coats"),
]

TASK_TYPES = ("how_to", "mistakes", "plan", "troubleshoot")
QUESTIONS: dict[str, tuple[str, ...]] = {
    "how_to": ("How do I {task}?", "What is the best way to {task}?", "Can you tell me how to {task}?"),
    "mistakes": ("What mistakes should I avoid when I {task}?", "What do people get wrong when they {task}?",
                 "Which pitfalls should I watch for if I {task}?"),
    "plan": ("Can you give me a weekly plan to {task}?", "How should I schedule my first weeks to {task}?",
             "Please lay out a week-by-week plan to {task}."),
    "troubleshoot": ("I tried to {task} and it did not work. What should I check?",
                     "My attempt to {task} went badly. What could be wrong?",
                     "Something keeps going wrong when I {task}. Where do I look?"),
}
# How each answer mode opens and phrases its tips (prose item, list item); {n} is the ordinal.
MODE_HEADERS: dict[str, tuple[str, ...]] = {
    "how_to": ("Here is how to {task}.", "To {task}, follow these steps.", "Good question about {subject}."),
    "mistakes": ("Here are the mistakes to avoid when you {task}.", "People often slip up when they {task}.",
                 "A few errors are common with {subject}."),
    "plan": ("Here is a plan to {task}.", "A week-by-week plan works well for {subject}.",
             "Spread it over a few weeks if you want to {task}."),
    "troubleshoot": ("Here is what to check when things go wrong.", "Let us find what went wrong with {subject}.",
                     "A few checks usually find the problem with {subject}."),
}
ORDINALS = ("one", "two", "three")
PROSE_ITEMS: dict[str, tuple[str, str, str]] = {
    "how_to": ("First, {tip}.", "Then, {tip}.", "Finally, {tip}."),
    "mistakes": ("A common mistake is forgetting to {tip}.", "Another is forgetting to {tip}.",
                 "People also forget to {tip}."),
    "plan": ("In week one, {tip}.", "In week two, {tip}.", "In week three, {tip}."),
    "troubleshoot": ("First, make sure you {tip}.", "Next, make sure you {tip}.", "Last, make sure you {tip}."),
}
LIST_ITEMS: dict[str, str] = {"how_to": "{Tip}.", "mistakes": "Forgetting to {tip}.",
                              "plan": "Week {ordinal}: {tip}.", "troubleshoot": "Make sure you {tip}."}
BRIEF_JOIN: dict[str, str] = {"how_to": "{tip}", "mistakes": "do not forget to {tip}",
                              "plan": "week {ordinal}: {tip}", "troubleshoot": "make sure you {tip}"}
HEDGES = ("It really depends on a lot of factors with {subject}, so it is hard to say.",
          "Maybe, maybe not; with {subject} there is no single answer.",
          "I think it could possibly help to look into {subject} more, perhaps.",
          "Honestly {subject} varies, and you might want to ask someone else.",
          "There is no simple rule for {subject}; everyone does it differently.",
          "It is hard to be specific about {subject} without more details.")
FILLERS = ("There are many things to consider here.", "Everyone has their own approach to this.",
           "Results can vary from person to person.", "It is a common question.",
           "Take your time with it.", "Do not worry if it takes a while.")

CONSTRAINTS = ("list", "brief", "example", "summary", "beginner")
CONSTRAINT_TEXT: dict[str, tuple[str, ...]] = {
    "list": ("Please answer as a numbered list.", "Use a numbered list."),
    "brief": ("Keep it brief.", "Keep the answer short."),
    "example": ("Include a concrete example.", "Give me an example."),
    "summary": ("End with a one-line summary.", "Finish with a short summary."),
    "beginner": ("I am a complete beginner.", "Assume I am new to this."),
}
EXAMPLES = ("For example, a friend began to {tip} and it helped.", "For example, I learned to {tip}.",
            "For example, my neighbour made a point to {tip}.")
BEGINNER_NOTES = ("New to this? Start small.", "New to this? Go step by step.",
                  "New to this? Do not aim for perfection.")
CONTEXT = ("I have meant to do this for a while.", "My schedule is busy.", "A friend sent me here.",
           "Online guides confused me.", "My budget is small.", "It matters for a project.",
           "I want to get it right this time.", "My family keeps asking about it.")
EARLIER = (("I have been reading about {subject}.", "That is a useful topic. What would you like to know?"),
           ("I want to get better at {subject}.", "Happy to help with {subject}. What is your question?"),
           ("Can we talk about {subject}?", "Of course. Ask away."))
MAX_TRIES = 200


def _cap(s: str) -> str:
    return s[:1].upper() + s[1:]


@dataclass(frozen=True)
class PromptFeatures:
    topic: int  # index into TOPICS
    task: str
    constraints: frozenset[str]


@dataclass(frozen=True)
class ResponseFeatures:
    topic: int  # the topic the response answers (its own prompt's, unless it misread the request)
    mode: str  # the task type it answers
    markers: frozenset[str]  # constraint markers its text carries
    level: int  # 0..3 specific tips


def answer_quality(prompt: PromptFeatures, response: ResponseFeatures) -> float:
    """The rubric r(P, y) of the module doc: how well response y answers prompt P."""
    if response.topic != prompt.topic:
        return 0.0
    return (1.0 + response.level + W_TASK * (response.mode == prompt.task)
            + W_CONSTRAINT * len(response.markers & prompt.constraints))


def expected_answer_quality(n_constraints: int) -> float:
    """E[r | prompt] under the response draws of the module doc (the level's mean is 1.5 by the
    symmetric cut points)."""
    mean_level = float(np.dot(np.arange(4), np.diff([0.0, *norm.cdf(LEVEL_CUTS), 1.0])))
    return P_ON_TOPIC * (1.0 + mean_level + W_TASK * P_RIGHT_TASK + W_CONSTRAINT * P_MARKER_ASKED * n_constraints)


def prompt_features(p: PromptRecord) -> PromptFeatures:
    """The features a simulated prompt was drawn with (from its meta)."""
    m = p.meta
    if m.get("topic") not in _TOPIC_INDEX or m.get("task_type") not in TASK_TYPES:
        raise ValueError(f"prompt {p.prompt_id} is not from the simulated set (no known topic)")
    return PromptFeatures(_TOPIC_INDEX[m["topic"]], m["task_type"], frozenset(m.get("constraints", ())))


def response_features(r: Response) -> ResponseFeatures:
    m = r.meta
    return ResponseFeatures(_TOPIC_INDEX[m["topic"]], m["mode"], frozenset(m["markers"]), int(m["level"]))


def _prompt_text(f: PromptFeatures, n_context: int, rng: np.random.Generator,
                 questions: dict[str, tuple[str, ...]] = QUESTIONS, constraint_alt: int | None = None) -> str:
    subject, task = TOPICS[f.topic][0], TOPICS[f.topic][1]
    ctx = [CONTEXT[k] for k in rng.choice(len(CONTEXT), size=n_context, replace=False)]
    q = questions[f.task][rng.integers(len(questions[f.task]))].format(task=task, subject=subject)
    cons = [CONSTRAINT_TEXT[c][constraint_alt if constraint_alt is not None else rng.integers(2)]
            for c in CONSTRAINTS if c in f.constraints]
    return " ".join([*ctx, q, *cons])


def _response_text(f: ResponseFeatures, rng: np.random.Generator) -> str:
    subject, task, tips, summary = TOPICS[f.topic]
    order = rng.permutation(4)
    used = [tips[k] for k in order[: f.level]]
    spare = tips[order[3]]
    brief = "brief" in f.markers
    parts: list[str] = []
    if "beginner" in f.markers:
        parts.append(BEGINNER_NOTES[rng.integers(len(BEGINNER_NOTES))])
    if not brief:
        parts.append(MODE_HEADERS[f.mode][rng.integers(3)].format(task=task, subject=subject))
    if f.level == 0:  # no tips; a requested layout still shows
        hedge = HEDGES[rng.integers(len(HEDGES))].format(subject=subject)
        parts.append(f"1. {hedge}" if "list" in f.markers else hedge)
    elif "list" in f.markers:
        parts += [f"{n + 1}. " + LIST_ITEMS[f.mode].format(tip=t, Tip=_cap(t), ordinal=ORDINALS[n])
                  for n, t in enumerate(used)]
    elif brief:
        parts.append(_cap("; ".join(BRIEF_JOIN[f.mode].format(tip=t, ordinal=ORDINALS[n])
                                    for n, t in enumerate(used))) + ".")
    else:
        parts += [PROSE_ITEMS[f.mode][n].format(tip=t) for n, t in enumerate(used)]
        if f.level == 1:
            parts.append(FILLERS[rng.integers(len(FILLERS))])
    if "example" in f.markers:
        parts.append(EXAMPLES[rng.integers(len(EXAMPLES))].format(tip=spare))
    if "summary" in f.markers:
        parts.append(f"In short, {summary}.")
    return " ".join(parts)


def _stratified_normal(n: int, rng: np.random.Generator) -> np.ndarray:
    """n standard-normal quantiles in random order: the sample variance is ~1 for every seed."""
    z = norm.ppf((np.arange(n) + 0.5) / n)
    return rng.permutation(z / z.std())


def _balanced(values: np.ndarray | list[Any], n: int, rng: np.random.Generator) -> np.ndarray:
    return rng.permutation(np.resize(np.asarray(values), n))


def _standardise(x: np.ndarray) -> np.ndarray:
    sd = x.std()
    return (x - x.mean()) / sd if sd > 0 else np.zeros_like(x)


@dataclass
class _PromptDraws:
    """The prompt-level draws: features, context length, visible and total offset scores, multi-turn flags."""
    feats: list[PromptFeatures]
    lengths: np.ndarray
    z_vis: np.ndarray
    z_u: np.ndarray
    multi: np.ndarray


def _draw_prompts(n: int, prompt_visibility: float, multi_turn_fraction: float,
                  rng: np.random.Generator) -> _PromptDraws:
    """Draw the prompts' four independent features, their offset scores z_vis, z_u and the multi-turn flags."""
    # -- prompt features: four independent draws --------------------------------------------------
    topics = _balanced(np.arange(len(TOPICS)), n, rng)
    tasks = _balanced(np.arange(len(TASK_TYPES)), n, rng)
    n_cons = _balanced(np.array([0, 1, 2]), n, rng)
    lengths = _balanced(np.array([0, 1, 2]), n, rng)
    cons = [frozenset(np.asarray(CONSTRAINTS)[rng.choice(len(CONSTRAINTS), size=m, replace=False)].tolist())
            for m in n_cons]
    feats = [PromptFeatures(int(t), TASK_TYPES[int(s)], c) for t, s, c in zip(topics, tasks, cons)]
    # feature effects on the prompt offset: one N(0,1) per level, drawn per seed (untuned)
    effects = [rng.normal(size=len(TOPICS))[topics], rng.normal(size=len(TASK_TYPES))[tasks],
               rng.normal(size=3)[n_cons], rng.normal(size=3)[lengths]]
    z_vis = _standardise(sum(_standardise(e) for e in effects))
    z_hid = _stratified_normal(n, rng)
    v = prompt_visibility
    z_u = math.sqrt(v) * z_vis + math.sqrt(1 - v) * z_hid
    z_u = z_u - z_u.mean()  # centre so the grand mean stays at 2 (fewer clipped ratings)
    multi = rng.random(n) < multi_turn_fraction
    return _PromptDraws(feats, lengths, z_vis, z_u, multi)


def _draw_response_features(f: PromptFeatures, rng: np.random.Generator) -> ResponseFeatures:
    """Draw one response written for prompt `f`, imperfectly: its topic, mode, markers and level."""
    topic = f.topic if rng.random() < P_ON_TOPIC else int((f.topic + 1 + rng.integers(len(TOPICS) - 1))
                                                           % len(TOPICS))
    mode = f.task if rng.random() < P_RIGHT_TASK else str(rng.choice([t for t in TASK_TYPES if t != f.task]))
    p_mark = np.where([c in f.constraints for c in CONSTRAINTS], P_MARKER_ASKED, P_MARKER_UNASKED)
    markers = frozenset(c for c, hit in zip(CONSTRAINTS, rng.random(len(CONSTRAINTS)) < p_mark) if hit)
    level = int(np.searchsorted(LEVEL_CUTS, rng.normal()))
    return ResponseFeatures(topic, mode, markers, level)


def _draw_responses(feats: list[PromptFeatures], k: int,
                    rng: np.random.Generator) -> tuple[list[list[ResponseFeatures]], np.ndarray]:
    """Draw k responses per prompt; return their features and the centred answer quality r - E[r | prompt]."""
    rfeats: list[list[ResponseFeatures]] = []
    r_centred = np.zeros((len(feats), k))
    for i, f in enumerate(feats):
        row = []
        for j in range(k):
            rf = _draw_response_features(f, rng)
            row.append(rf)
            r_centred[i, j] = answer_quality(f, rf) - expected_answer_quality(len(f.constraints))
        rfeats.append(row)
    return rfeats, r_centred


def _unique_prompt_messages(f: PromptFeatures, i: int, n_context: int, multi: bool, n_prompts: int,
                            rng: np.random.Generator, seen_last: set[str],
                            seen_conv: set[str]) -> list[dict[str, str]]:
    """Draw prompt i's conversation until its last turn and the whole conversation are new; record both."""
    subject = TOPICS[f.topic][0]
    for _ in range(MAX_TRIES):
        messages = []
        if multi:
            usr, ast = EARLIER[rng.integers(len(EARLIER))]
            messages += [{"role": "user", "content": usr.format(subject=subject)},
                         {"role": "assistant", "content": ast.format(subject=subject)}]
        last = _prompt_text(f, n_context, rng)
        messages.append({"role": "user", "content": last})
        conv = repr(messages)
        if last not in seen_last and conv not in seen_conv:
            break
    else:
        raise ValueError(f"simulated set: no unique text for prompt {i} after {MAX_TRIES} draws; "
                         f"n_prompts={n_prompts} is too large for the text material")
    seen_last.add(last)
    seen_conv.add(conv)
    return messages


def _unique_response_text(rf: ResponseFeatures, i: int, j: int, n_prompts: int, rng: np.random.Generator,
                          seen_resp: set[str]) -> str:
    """Draw response j of prompt i's text until it is new; record it."""
    for _ in range(MAX_TRIES):
        text = _response_text(rf, rng)
        if text not in seen_resp:
            break
    else:
        raise ValueError(f"simulated set: no unique text for response {j} of prompt {i} after "
                         f"{MAX_TRIES} draws; n_prompts={n_prompts} is too large for the text material")
    seen_resp.add(text)
    return text


def _response_record(pid: str, j: int, f: PromptFeatures, rf: ResponseFeatures, text: str, helpfulness: float,
                     latent: float, quality: float, rng: np.random.Generator) -> Response:
    """The Response for one text: helpfulness as given, the other attributes drawn around it, its ground truth."""
    words = len(text.split())
    ratings = {
        "helpfulness": helpfulness,
        "correctness": _clip(latent + rng.normal(0, 0.6)),
        "coherence": _clip(1.0 + rf.level + rng.normal(0, 0.5)),
        "complexity": _clip(1.0 + 0.5 * rf.level + 0.5 * len(f.constraints) + rng.normal(0, 0.5)),
        "verbosity": _clip(words / 12.0 + rng.normal(0, 0.4)),
    }
    return Response(f"{pid}:r{j}", text, ratings, meta={
        "topic": TOPICS[rf.topic][0], "mode": rf.mode, "markers": sorted(rf.markers), "level": rf.level,
        "answer_quality": answer_quality(f, rf), "quality": quality, "latent": latent})


def _rating_preferences(pid: str, responses: list[Response], label_agreement: float,
                        rng: np.random.Generator) -> list[Preference]:
    """Preference labels for a prompt's pairs with different helpfulness, flipped with prob 1 - label_agreement."""
    prefs: list[Preference] = []
    for a, b in combinations(responses, 2):
        ha, hb = a.ratings["helpfulness"], b.ratings["helpfulness"]
        if ha == hb:
            continue
        hi, lo = (a, b) if ha > hb else (b, a)
        agrees = bool(rng.random() < label_agreement)
        chosen, rejected = (hi, lo) if agrees else (lo, hi)
        prefs.append(Preference(pid, chosen.response_id, rejected.response_id, strength=abs(ha - hb),
                                subset="simulated", meta=(("agrees_with_ratings", agrees),)))
    return prefs


def simulate_rating_set(config: SimulationSettings | None = None, **knobs: Any) -> RatingSet:
    """Draw the simulated rating set (see module doc). Knobs override fields of `config`."""
    cfg = SimulationSettings(**{**(asdict(config) if config else {}), **knobs})
    cfg.validate()
    rng = np.random.default_rng(cfg.seed)
    sd_u, sd_q = cfg.variance_budget()
    n, k = cfg.n_prompts, cfg.responses_per_prompt
    d = _draw_prompts(n, cfg.prompt_visibility, cfg.multi_turn_fraction, rng)

    # -- responses: written for their prompt, imperfectly -----------------------------------------
    rfeats, r_centred = _draw_responses(d.feats, k, rng)
    q = sd_q * r_centred / (r_centred.std() or 1.0)
    e = rng.normal(0.0, cfg.rater_noise_sd, (n, k))
    # Fine-tune sd_u so the realised ICC(1) of the rounded ratings hits human_share (the finite
    # draws move the sample ICC by a few hundredths; the knob promises the realised value).
    sd_u = _calibrate_sd_u(d.z_u, q + e, cfg.human_share, sd_u)
    u = sd_u * d.z_u
    help_all = _round_clip(2.0 + u[:, None] + q + e)

    # -- texts: surface choices redrawn until every prompt and response text is unique ------------
    seen_conv: set[str] = set()
    seen_last: set[str] = set()
    seen_resp: set[str] = set()
    prompts: list[PromptRecord] = []
    prefs: list[Preference] = []
    for i, f in enumerate(d.feats):
        messages = _unique_prompt_messages(f, i, int(d.lengths[i]), bool(d.multi[i]), n, rng, seen_last, seen_conv)
        pid = f"sim-{i:04d}"
        responses = []
        for j, rf in enumerate(rfeats[i]):
            text = _unique_response_text(rf, i, j, n, rng, seen_resp)
            responses.append(_response_record(pid, j, f, rf, text, float(help_all[i, j]),
                                              float(2.0 + u[i] + q[i, j]), float(q[i, j]), rng))
        prompts.append(PromptRecord(pid, messages, responses, source="simulated", meta={
            "topic": TOPICS[f.topic][0], "task_type": f.task, "constraints": sorted(f.constraints),
            "length": int(d.lengths[i]), "prompt_offset": float(u[i]),
            "visible_offset": float(sd_u * math.sqrt(cfg.prompt_visibility) * d.z_vis[i])}))
        if cfg.with_preferences:
            prefs.extend(_rating_preferences(pid, responses, cfg.label_agreement, rng))
    return RatingSet(prompts=prompts, name="simulated", attributes=DEFAULT_ATTRIBUTES, preferences=prefs)


def _clip(x: float) -> float:
    return float(min(4, max(0, int(np.floor(x + 0.5)))))


def _round_clip(x: np.ndarray) -> np.ndarray:
    return np.clip(np.floor(x + 0.5), 0, 4)


def _calibrate_sd_u(z_u: np.ndarray, within: np.ndarray, target: float, start: float) -> float:
    """Bisection on the prompt-offset scale: smallest sd_u whose rounded ratings reach ICC(1) = target."""
    groups = np.repeat(np.arange(within.shape[0]), within.shape[1])

    def icc(sd: float) -> float:
        return icc1(_round_clip(2.0 + sd * z_u[:, None] + within).ravel(), groups)

    lo, hi = 0.0, max(4.0 * start, 0.5)
    if icc(lo) >= target:
        return lo
    while icc(hi) < target and hi < 50:
        hi *= 2
    for _ in range(40):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if icc(mid) < target else (lo, mid)
    return hi


def icc1_by_prompt(rs: RatingSet, attribute: str = "helpfulness") -> float:
    """Between-prompt share (ICC(1)) of `attribute` in a rating set."""
    tab = rs.ratings_table()
    return icc1(tab[attribute].to_numpy(float), tab["prompt_id"].to_numpy())


CONFIG_FIELDS = tuple(f.name for f in fields(SimulationSettings))
_TOPIC_INDEX = {subject: t for t, (subject, _, _, _) in enumerate(TOPICS)}


# --- prompt variants for the paraphrase and related-task conditions ------------------------------
# The simulator knows each prompt's features, so it can write the variants an instruction model
# would: a paraphrase keeps topic, task type, constraints and context and rewords the question and
# the constraint sentences (with wordings no original prompt uses, so a paraphrase never equals a
# prompt of the set); a related task stays on the subject but asks something none of the four task
# types answers.
PARAPHRASES: dict[str, tuple[str, ...]] = {
    "how_to": ("I would like to know how to {task}.", "Could you explain how one should {task}?",
               "Please walk me through how to {task}."),
    "mistakes": ("Which errors do beginners make when they {task}?", "Warn me about what can go wrong as I {task}.",
                 "What should I be careful not to do when I {task}?"),
    "plan": ("Could you split the work to {task} into weeks?", "Give me a schedule, week by week, to {task}.",
             "What would a multi-week programme to {task} look like?"),
    "troubleshoot": ("It failed when I tried to {task}. What should I look at?",
                     "Help me find out why my attempt to {task} failed.",
                     "I could not {task} properly. What might be the cause?"),
}
PARAPHRASE_CONSTRAINT_TEXT: dict[str, str] = {
    "list": "Format it as numbered points.", "brief": "Be concise.", "example": "Show one example.",
    "summary": "Wrap up with a summary line.", "beginner": "Explain it for a novice.",
}
RELATED = ("What are the most common myths about {subject}?",
           "How long does it usually take to get good at {subject}?",
           "What is the history behind {subject}?",
           "Which tools or materials are needed for {subject}, and what do they cost?",
           "Is {subject} worth the effort for a beginner? Give pros and cons.")


def simulated_prompt_variants(rs: RatingSet, task: str, n: int = 4, seed: int = 0) -> list[dict[str, Any]]:
    """Rows ``{prompt_id, variant, text}`` (the FileGenerator format) rewording each simulated
    prompt's last user turn (``task="paraphrase"``) or giving a related task on the same subject
    (``task="related"``); at most ``n`` per prompt, seeded."""
    if task not in ("paraphrase", "related"):
        raise ValueError(f"task must be 'paraphrase' or 'related', got '{task}'")
    rng = np.random.default_rng(seed)
    rows: list[dict[str, Any]] = []
    for p in rs.prompts:
        f = prompt_features(p)
        subject, verb = TOPICS[f.topic][0], TOPICS[f.topic][1]
        if task == "paraphrase":
            # the context sentences are the user's situation: kept, like the request's meaning
            ctx = [c for c in CONTEXT if c in p.last_user_text]
            cons = [PARAPHRASE_CONSTRAINT_TEXT[c] for c in CONSTRAINTS if c in f.constraints]
            bodies = [" ".join([*ctx, t.format(task=verb), *cons]) for t in PARAPHRASES[f.task]]
        else:
            bodies = [t.format(subject=subject) for t in RELATED]
        for v, idx in enumerate(rng.permutation(len(bodies))[:n]):
            rows.append({"prompt_id": p.prompt_id, "variant": v, "text": bodies[idx]})
    return rows
