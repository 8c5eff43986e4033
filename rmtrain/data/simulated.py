"""The simulated rating set that ships with matchrm (the demo's default data).

Generative model (all draws from ``numpy.random.default_rng(seed)``; i = prompt, j = response)::

    tier_i     in {-2,-1,0,1,2}, balanced over prompts; shown in the prompt as framing words
               ("Quick easy question:" ... "Tricky multi-part request with strict constraints:")
    z_vis_i    = tier_i / sqrt(2)                      (unit variance, visible in the prompt)
    z_hid_i    ~ N(0,1), stratified normal quantiles   (hidden prompt effect)
    u_i        = sd_u * (sqrt(v) z_vis_i + sqrt(1-v) z_hid_i)   prompt offset, v = prompt_visibility
    q_ij       ~ N(0, sd_q^2)                          response quality, shown in the text
    e_ij       ~ N(0, rater_noise_sd^2)                rater noise, not shown anywhere
    helpfulness_ij = clip(round(2 + u_i + q_ij + e_ij), 0, 4)

The variance budget makes the ICC(1) of helpfulness grouped by prompt equal ``human_share``:
with T = total_sd^2 + 1/12 (1/12 = the variance rounding adds), sd_q^2 = (1 - human_share) * T
- 1/12 - rater_noise_sd^2, and sd_u^2 = human_share * T as a start. Because the finite draws of
q and e move the sample ICC by ~0.02 at 600 prompts, sd_u is then fine-tuned by bisection (same
draws) so that the realised ICC(1) of the rounded, clipped ratings equals ``human_share`` (to
~0.005, the rest being rounding granularity). Prompt draws are stratified (balanced tiers,
normal quantiles) so sd_u stays close to its nominal value.

Text. The response text shows its quality level L_ij = cut(q_ij / sd_q at -1, -0.35, 0.35, 1):
L=4 three specific, on-topic facts in a First/Second/Finally structure with a summary; L=3 two
facts; L=2 one fact plus generic filler; L=1 vague hedging with no specifics; L=0 off-topic facts
(from another topic), a truncated sentence, or an unhelpful deflection. Prompts name one of 30
topics; multi-turn prompts (``multi_turn_fraction``) carry an earlier user/assistant exchange on
the same topic. Responses stay under ~60 words.

Other attributes (ints 0-4): correctness = clip(round(2 + u + q + N(0, 0.6^2))); coherence =
clip(round(1 + 0.75 L + N(0, 0.5^2))); complexity = clip(round(1.5 + 0.3 L - 0.35 tier + N(0, 0.5^2)));
verbosity = clip(round(words / 14 + N(0, 0.4^2))).

Preference labels (``with_preferences``): for every within-prompt pair with different helpfulness
ratings, the label follows the rating order with probability ``label_agreement`` and is flipped
otherwise; strength = |rating gap|; meta records ``agrees_with_ratings``.

Ground truth for audits is kept in meta: PromptRecord.meta {"topic", "tier", "prompt_offset",
"visible_offset"}, Response.meta {"quality_level", "quality", "latent"}.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from itertools import combinations
from typing import Any

import numpy as np
from scipy.stats import norm

from rmtrain.data.schema import DEFAULT_ATTRIBUTES, Preference, PromptRecord, RatingSet, Response
from rmtrain.data.variance import icc1

ROUNDING_VAR = 1.0 / 12.0


@dataclass
class SimulationConfig:
    n_prompts: int = 600
    responses_per_prompt: int = 4
    human_share: float = 0.3  # target ICC(1) of helpfulness by prompt
    rater_noise_sd: float = 0.5
    total_sd: float = 1.0  # SD of the latent helpfulness before rounding
    prompt_visibility: float = 0.6  # share of the prompt-offset variance visible in the prompt text
    multi_turn_fraction: float = 0.2
    label_agreement: float = 0.9
    with_preferences: bool = True
    seed: int = 0

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
# (subject, task, four specific facts, summary). Facts are short so that L=4 stays under 60 words.
TOPICS: list[tuple[str, str, tuple[str, str, str, str], str]] = [
    ("sourdough bread", "bake sourdough bread",
     ("feed the starter twelve hours before mixing", "use about two percent salt by flour weight",
      "let the dough proof overnight in the fridge", "bake in a preheated Dutch oven with the lid on"),
     "an active starter and a long cold proof give the best loaf"),
    ("houseplant watering", "water houseplants",
     ("check the top inch of soil with a finger first", "water less in winter when growth slows",
      "use pots with drainage holes to prevent root rot", "succulents need far less water than ferns"),
     "water when the soil is dry, not on a fixed calendar"),
    ("marathon training", "train for a marathon",
     ("build weekly mileage by about ten percent", "do one long slow run each week",
      "taper for two to three weeks before race day", "practice fueling with gels during long runs"),
     "gradual mileage and a proper taper matter most"),
    ("Python lists", "sort a list in Python",
     ("sorted returns a new list and leaves the original alone", "list.sort sorts in place and returns None",
      "pass key=len to sort strings by length", "use reverse=True for descending order"),
     "use sorted for a copy and list.sort to change the list itself"),
    ("credit scores", "improve a credit score",
     ("pay every bill on time since payment history weighs most", "keep card utilization under thirty percent",
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
    ("photosynthesis", "understand photosynthesis",
     ("plants turn light, water and carbon dioxide into glucose", "chlorophyll in chloroplasts absorbs the light",
      "oxygen is released as a by-product", "the Calvin cycle fixes carbon into sugar"),
     "light energy is stored as sugar and oxygen is released"),
    ("coffee brewing", "brew pour-over coffee",
     ("use a ratio of about one gram of coffee to sixteen of water", "heat the water to around ninety-four degrees",
      "grind medium-fine just before brewing", "let the grounds bloom for thirty seconds"),
     "fresh grind, the right ratio and a bloom make a clean cup"),
    ("sleep hygiene", "sleep better",
     ("keep the same wake time every day", "avoid caffeine after early afternoon",
      "keep the bedroom dark and cool", "put screens away an hour before bed"),
     "a fixed schedule and a dark cool room help most"),
    ("SQL joins", "join two tables in SQL",
     ("an inner join keeps only matching rows", "a left join keeps every row of the left table",
      "join on indexed key columns for speed", "alias tables to keep queries readable"),
     "pick inner or left join depending on which rows must survive"),
    ("budgeting", "make a monthly budget",
     ("list take-home income and fixed bills first", "try the fifty thirty twenty split",
      "track spending in categories for a month", "automate a transfer to savings on payday"),
     "know your income, track spending and save automatically"),
    ("dog training", "teach a dog to sit",
     ("hold a treat above the nose and move it back", "say sit once as the hips go down",
      "reward within two seconds", "keep sessions short, about five minutes"),
     "lure, mark and reward quickly in short sessions"),
    ("git branches", "use git branches",
     ("create a branch with git switch -c name", "commit small focused changes on it",
      "rebase on main to keep history linear", "open a pull request for review before merging"),
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
    ("climate change", "explain climate change",
     ("burning fossil fuels adds carbon dioxide to the air", "greenhouse gases trap outgoing heat",
      "average global temperature has risen about one degree", "melting ice and warmer oceans raise sea level"),
     "more greenhouse gas traps more heat and warms the planet"),
    ("learning guitar", "learn guitar chords",
     ("start with G, C, D and E minor", "press just behind the fret, not on it",
      "practice switching between two chords for a minute", "play daily for fifteen minutes"),
     "a few open chords and daily switching practice"),
    ("email etiquette", "write a professional email",
     ("use a specific subject line", "state the request in the first two sentences",
      "keep paragraphs short", "close with a clear next step and a signature"),
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
     ("VLOOKUP searches the first column of a range", "set the last argument to FALSE for exact match",
      "lock the range with dollar signs before copying", "XLOOKUP can search in any direction"),
     "use exact match and locked ranges, or XLOOKUP"),
    ("bicycle maintenance", "maintain a bicycle",
     ("clean and lube the chain every few hundred kilometers", "check brake pads for wear",
      "keep tires at the pressure printed on the sidewall", "tighten loose bolts with the right torque"),
     "a clean chain, good brakes and correct tire pressure"),
    ("language learning", "learn a new language",
     ("study the thousand most common words first", "use spaced repetition flashcards daily",
      "speak with a tutor or partner each week", "listen to podcasts made for learners"),
     "frequent words, spaced repetition and regular speaking"),
    ("first aid for burns", "treat a minor burn",
     ("cool the burn under running water for twenty minutes", "remove rings before swelling starts",
      "cover loosely with cling film or a clean dressing", "do not apply butter or ice"),
     "cool running water for twenty minutes, then cover it"),
    ("time management", "manage time better",
     ("list the three most important tasks each morning", "block focused time on the calendar",
      "batch email into two set times", "use the two-minute rule for quick tasks"),
     "prioritize three tasks and protect focus blocks"),
    ("HTTP status codes", "understand HTTP status codes",
     ("2xx codes mean success, like 200 OK", "3xx codes are redirects such as 301",
      "4xx codes are client errors like 404 Not Found", "5xx codes are server errors like 500"),
     "the first digit tells success, redirect, client or server error"),
    ("saving for retirement", "save for retirement",
     ("contribute enough to get the full employer match", "prefer low-cost index funds",
      "raise the savings rate with each pay rise", "start early so compounding can work"),
     "take the match, buy cheap index funds and start early"),
    ("painting a room", "paint a room",
     ("wash walls and patch holes before painting", "apply primer over dark or patched areas",
      "cut in the edges with a brush before rolling", "use two thin coats rather than one thick coat"),
     "prep the walls, prime and roll two thin coats"),
]

TIER_FRAMES: dict[int, tuple[str, ...]] = {
    2: ("Quick easy question:", "Simple one for you:"),
    1: ("Basic question:", "Short question:"),
    0: ("Question:", "I was wondering:"),
    -1: ("Detailed question with several constraints:", "Somewhat complicated question, please be precise:"),
    -2: ("Tricky, ambiguous multi-part request under strict constraints:",
         "Very hard edge-case question with conflicting requirements:"),
}
QUESTIONS = ("How do I {task}?", "What is the best way to {task}?", "Can you tell me how to {task}?",
             "Any advice on how to {task}?", "What should I know about {subject}?")
OPENERS = ("Here is how to {task}.", "Good question about {subject}.", "To {task}, follow these steps.",
           "Sure, here is a clear answer.")
FILLERS = ("There are many things to consider here.", "Everyone has their own approach to this.",
           "Results can vary from person to person.", "It is a common question.")
HEDGES = ("It really depends on a lot of factors, so it is hard to say.",
          "Maybe, maybe not; there is no single answer and opinions differ.",
          "I think it could possibly help to look into it more, perhaps.",
          "Honestly it varies, and you might want to ask someone else.")
DEFLECTIONS = ("I am not sure what you mean.", "That is an interesting thing to think about.",
               "Let me know if you have any other questions.")
EARLIER = (("I have been reading about {subject}.", "That is a useful topic. What would you like to know?"),
           ("I want to get better at {subject}.", "Happy to help with {subject}. What is your question?"),
           ("Can we talk about {subject}?", "Of course. Ask away."))


def _cap(s: str) -> str:
    return s[:1].upper() + s[1:]


def _response_text(level: int, t: int, rng: np.random.Generator) -> str:
    subject, task, facts, summary = TOPICS[t]
    order = rng.permutation(4)
    f = [facts[k] for k in order]
    opener = OPENERS[rng.integers(len(OPENERS))].format(task=task, subject=subject)
    if level == 4:
        return (f"{opener} First, {f[0]}. Second, {f[1]}. Finally, {f[2]}. In short, {summary}.")
    if level == 3:
        return f"{opener} First, {f[0]}. Also, {f[1]}."
    if level == 2:
        return f"{_cap(f[0])}. {FILLERS[rng.integers(len(FILLERS))]}"
    if level == 1:
        return f"{HEDGES[rng.integers(len(HEDGES))]} It is about {subject} in general, I guess."
    kind = rng.integers(3)
    if kind == 0:  # off-topic: a fact from another topic
        other = TOPICS[(t + 1 + rng.integers(len(TOPICS) - 1)) % len(TOPICS)]
        return f"{_cap(other[2][rng.integers(4)])}. {FILLERS[rng.integers(len(FILLERS))]}"
    if kind == 1:  # truncated mid-sentence
        words = f"Well, about {subject}, the main thing you should do is to".split()
        return " ".join(words[: 5 + rng.integers(len(words) - 5)])
    return DEFLECTIONS[rng.integers(len(DEFLECTIONS))]


def _stratified_normal(n: int, rng: np.random.Generator) -> np.ndarray:
    """n standard-normal quantiles in random order: the sample variance is ~1 for every seed."""
    z = norm.ppf((np.arange(n) + 0.5) / n)
    return rng.permutation(z / z.std())


def simulate_rating_set(config: SimulationConfig | None = None, **knobs: Any) -> RatingSet:
    """Draw the simulated rating set (see module doc). Knobs override fields of `config`."""
    cfg = SimulationConfig(**{**(asdict(config) if config else {}), **knobs})
    cfg.validate()
    rng = np.random.default_rng(cfg.seed)
    sd_u, sd_q = cfg.variance_budget()
    n, k = cfg.n_prompts, cfg.responses_per_prompt

    tiers = rng.permutation(np.resize(np.array([-2, -1, 0, 1, 2]), n))
    z_vis = tiers / math.sqrt(2.0)
    z_vis = (z_vis - z_vis.mean()) / (z_vis.std() or 1.0)
    z_hid = _stratified_normal(n, rng)
    v = cfg.prompt_visibility
    z_u = math.sqrt(v) * z_vis + math.sqrt(1 - v) * z_hid
    z_u = z_u - z_u.mean()  # centre so the grand mean stays at 2 (fewer clipped ratings)
    topics = rng.permutation(np.resize(np.arange(len(TOPICS)), n))
    multi = rng.random(n) < cfg.multi_turn_fraction
    q = rng.normal(0.0, sd_q, (n, k))
    e = rng.normal(0.0, cfg.rater_noise_sd, (n, k))
    # Fine-tune sd_u so the realised ICC(1) of the rounded ratings hits human_share (the draws of
    # q and e move the sample ICC by ~0.02 at 600 prompts; the knob promises the realised value).
    sd_u = _calibrate_sd_u(z_u, q + e, cfg.human_share, sd_u)
    u = sd_u * z_u
    help_all = _round_clip(2.0 + u[:, None] + q + e)

    prompts: list[PromptRecord] = []
    prefs: list[Preference] = []
    for i in range(n):
        t, tier = int(topics[i]), int(tiers[i])
        subject, task = TOPICS[t][0], TOPICS[t][1]
        frame = TIER_FRAMES[tier][rng.integers(2)]
        question = QUESTIONS[rng.integers(len(QUESTIONS))].format(task=task, subject=subject)
        messages = []
        if multi[i]:
            usr, ast = EARLIER[rng.integers(len(EARLIER))]
            messages += [{"role": "user", "content": usr.format(subject=subject)},
                         {"role": "assistant", "content": ast.format(subject=subject)}]
        messages.append({"role": "user", "content": f"{frame} {question}"})
        pid = f"sim-{i:04d}"
        responses = []
        for j in range(k):
            level = int(np.searchsorted([-1.0, -0.35, 0.35, 1.0], q[i, j] / sd_q))
            text = _response_text(level, t, rng)
            latent = 2.0 + u[i] + q[i, j]
            words = len(text.split())
            ratings = {
                "helpfulness": float(help_all[i, j]),
                "correctness": _clip(latent + rng.normal(0, 0.6)),
                "coherence": _clip(1.0 + 0.75 * level + rng.normal(0, 0.5)),
                "complexity": _clip(1.5 + 0.3 * level - 0.35 * tier + rng.normal(0, 0.5)),
                "verbosity": _clip(words / 14.0 + rng.normal(0, 0.4)),
            }
            responses.append(Response(f"{pid}:r{j}", text, ratings,
                                      meta={"quality_level": level, "quality": float(q[i, j]),
                                            "latent": float(latent)}))
        prompts.append(PromptRecord(pid, messages, responses, source="simulated",
                                    meta={"topic": subject, "tier": tier, "prompt_offset": float(u[i]),
                                          "visible_offset": float(sd_u * math.sqrt(v) * z_vis[i])}))
        if cfg.with_preferences:
            for a, b in combinations(responses, 2):
                ha, hb = a.ratings["helpfulness"], b.ratings["helpfulness"]
                if ha == hb:
                    continue
                hi, lo = (a, b) if ha > hb else (b, a)
                agrees = bool(rng.random() < cfg.label_agreement)
                chosen, rejected = (hi, lo) if agrees else (lo, hi)
                prefs.append(Preference(pid, chosen.response_id, rejected.response_id, strength=abs(ha - hb),
                                        subset="simulated", meta=(("agrees_with_ratings", agrees),)))
    rs = RatingSet(prompts=prompts, name="simulated", attributes=DEFAULT_ATTRIBUTES, preferences=prefs)
    return rs


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



CONFIG_FIELDS = tuple(f.name for f in fields(SimulationConfig))


# --- prompt variants for the paraphrase and related-task conditions ------------------------------
# The simulator knows each prompt's topic and difficulty frame, so it can write the variants an
# instruction model would: a paraphrase keeps topic, task and difficulty and rewords the question;
# a related task stays on the subject but asks for something the original answer does not give.
PARAPHRASES = ("I would like to know how to {task}.", "Could you explain how one should {task}?",
               "Please walk me through how to {task}.", "What is a good approach to {task}?",
               "How would you go about it if you had to {task}?")
RELATED = ("What are the most common mistakes people make with {subject}?",
           "How long does it usually take to get good at {subject}?",
           "What is the history behind {subject}?",
           "Which tools or materials are needed for {subject}, and what do they cost?",
           "Is {subject} worth the effort for a beginner? Give pros and cons.")
_TASK_BY_SUBJECT = {subject: task for subject, task, _, _ in TOPICS}
_FRAME_TIER = {f: tier for tier, frames in TIER_FRAMES.items() for f in frames}


def simulated_prompt_variants(rs: RatingSet, task: str, n: int = 4, seed: int = 0) -> list[dict[str, Any]]:
    """Rows ``{prompt_id, variant, text}`` (the FileGenerator format) rewording each simulated
    prompt's last user turn (``task="paraphrase"``) or giving a related task on the same subject
    (``task="related"``); at most ``n`` per prompt, seeded."""
    if task not in ("paraphrase", "related"):
        raise ValueError(f"task must be 'paraphrase' or 'related', got '{task}'")
    rng = np.random.default_rng(seed)
    rows: list[dict[str, Any]] = []
    for p in rs.prompts:
        subject = p.meta.get("topic")
        if subject not in _TASK_BY_SUBJECT:
            raise ValueError(f"prompt {p.prompt_id} is not from the simulated set (no known topic)")
        last = p.last_user_text
        frame = next((f for f in _FRAME_TIER if last.startswith(f)), "")
        templates = PARAPHRASES if task == "paraphrase" else RELATED
        for v, idx in enumerate(rng.permutation(len(templates))[:n]):
            body = templates[idx].format(task=_TASK_BY_SUBJECT[subject], subject=subject)
            # the difficulty frame is part of the request's meaning: a paraphrase keeps it
            text = f"{frame} {body}".strip() if task == "paraphrase" else body
            rows.append({"prompt_id": p.prompt_id, "variant": v, "text": text})
    return rows
