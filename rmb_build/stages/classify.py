"""Stage 3, classify: each query's goal and one of RMB's 49 scenarios, by one of two methods behind
one interface (``predict(queries) -> list[Prediction]``):

- ``EmbeddingClassifier``: scikit-learn logistic regression on all-MiniLM-L6-v2 embeddings, trained
  on ``prompts/taxonomy.yaml`` (``default()``) or on a labelled release (``from_release``). Offline.
  The scenario is the most probable class (goal and task follow from it): on RMB's sample this beat
  choosing goal, then task, then scenario by summed probabilities. Below a confidence threshold
  chosen by cross-validation on its training examples it abstains: the query keeps its confidence
  but gets no scenario, and selection drops it with its own reason.
- ``LLMClassifier``: asks a chat model, with the taxonomy in the prompt and a JSON-schema reply.

``select_balanced`` then picks a subset spread over goals and scenarios for generation.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import hashlib
import io
import logging
import os
import threading
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Protocol, Sequence

import numpy as np

from rmb_build.core import atomic
from rmb_build.core import paths as P
from rmb_build.core.errors import InputError
from rmb_build.core.items import Turn
from rmb_build.core.paths import user_cache_dir
from rmb_build.core.prompting import load_prompt, prompt_hash
from rmb_build.core.records import Query
from rmb_build.core.taxonomy import all_scenarios, is_known, parse_scenario_id
from rmb_build.core.text import last_user_turn
from rmb_build.core.yaml_file import parse_yaml
from rmb_build.embed.encoder import DEFAULT_MODEL, Embed, Encoder, check_encoder, model_fingerprint
from rmb_build.llm.types import ChatClient
from rmb_build.stages.embed import embedded_first
from rmb_build.stages.flow import batched
from rmb_build.stages.options import ClassifierConfig, EmbeddingsConfig
from rmb_build.stages.spec import Position, StageEnv, StageResult, StageSpec

if TYPE_CHECKING:  # the build config and run are the pipeline's, a layer above
    from rmb_build.pipeline.config import BuildConfig
    from rmb_build.pipeline.context import BuildRun
    from rmb_build.release.read import Release
    from rmb_build.stages.flow import Flow

TAXONOMY_FILE = "taxonomy.yaml"
log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Prediction:
    scenario_id: str | None  # None: no answer (an LLM reply failed) or the classifier abstained
    confidence: float | None = None
    abstained: bool = False  # True: its best guess was below the classifier's confidence threshold

    @property
    def goal(self) -> str | None:
        return parse_scenario_id(self.scenario_id).goal if self.scenario_id else None


class Classifier(Protocol):
    def predict(self, queries: Sequence[Query]) -> list[Prediction]: ...


def classifier_text(conversation: Sequence[Turn]) -> str:
    """What a classifier reads: the final user turn (earlier turns only set the scene)."""
    return last_user_turn(conversation)


def example_conversation(example: str | Sequence[Mapping[str, str]]) -> tuple[Turn, ...]:
    """A taxonomy example as a conversation: a string is one user turn; a list holds one-key
    mappings ``{user: ...}`` / ``{assistant: ...}`` (checked by ``load_taxonomy``)."""
    if isinstance(example, str):
        return (Turn("user", example),)
    return tuple(Turn(role, content) for turn in example for role, content in turn.items())


def _check_example(ex: object) -> str | None:
    """Why a taxonomy example is malformed, or None."""
    if isinstance(ex, str):
        return None if ex.strip() else "empty"
    if not isinstance(ex, list) or not ex:
        return f"not a string or a list of turns (quote it): {ex!r}"  # an unquoted "a: b" is a mapping
    for turn in ex:
        if not (
            isinstance(turn, dict)
            and len(turn) == 1
            and next(iter(turn)) in ("user", "assistant")
            and isinstance(next(iter(turn.values())), str)
        ):
            return f"a turn must be one 'user: TEXT' or 'assistant: TEXT' (quote the text): {turn!r}"
    if "user" not in ex[-1]:
        return "a multi-turn example must end with a user turn"
    return None


@lru_cache(maxsize=1)
def load_taxonomy() -> dict[str, dict[str, Any]]:
    """``prompts/taxonomy.yaml`` as {scenario id: {"description", "examples"}}, checked against the 49.
    An example is a string (one user turn) or a list of turns (see ``example_conversation``)."""
    data = parse_yaml(load_prompt(TAXONOMY_FILE), f"prompts/{TAXONOMY_FILE}")
    scenarios = (data.get("scenarios") if isinstance(data, dict) else None) or {}
    wanted = [s.id for s in all_scenarios()]
    missing = [s for s in wanted if s not in scenarios]
    extra = [s for s in scenarios if not is_known(s)]
    if missing or extra:
        raise InputError(
            f"prompts/{TAXONOMY_FILE}", f"missing {missing}" if missing else f"unknown {extra}", field="scenarios"
        )
    for sid in wanted:
        entry = scenarios[sid]
        entry = entry if isinstance(entry, dict) else {}
        examples = entry.get("examples")
        if not isinstance(entry.get("description"), str) or not isinstance(examples, list) or not examples:
            raise InputError(f"prompts/{TAXONOMY_FILE}", "needs a description and examples", item=sid)
        for k, ex in enumerate(examples):
            problem = _check_example(ex)
            if problem:
                raise InputError(f"prompts/{TAXONOMY_FILE}", problem, item=sid, field=f"examples[{k}]")
    return {sid: scenarios[sid] for sid in wanted}


class EmbeddingClassifier:
    """Logistic regression over sentence embeddings (see the module docstring). It abstains (answers
    ``Prediction(None, confidence, abstained=True)``) when its top probability is below ``threshold``.

    ``encoder``/``backend`` name the sentence encoder; ``embed`` is what computes its vectors (the
    build's embedding store, see ``using``), by default the plain encoder."""

    def __init__(
        self,
        model: Any,
        encoder: str = DEFAULT_MODEL,
        trained_on: str = "",
        threshold: float = 0.0,
        backend: str = "torch",
        embed: Embed | None = None,
    ):
        self.model = model
        self.encoder = encoder
        self.backend = backend
        self.trained_on = trained_on
        self.threshold = threshold
        self.labels: list[str] = [str(c) for c in model.classes_]
        self.embed: Embed = embed or Encoder(encoder, backend)

    def using(self, embed: Embed) -> "EmbeddingClassifier":
        """This classifier with its vectors from ``embed`` (same encoder, e.g. the build's embedding store)."""
        check_encoder(embed, self.encoder, self.backend)
        clone = copy.copy(self)
        clone.embed = embed
        return clone

    @classmethod
    def fit(
        cls,
        texts: Sequence[str],
        labels: Sequence[str],
        encoder: str = DEFAULT_MODEL,
        trained_on: str = "",
        C: float = 10.0,
        abstain: bool = True,
        *,
        backend: str = "torch",
        embed: Embed | None = None,
    ) -> "EmbeddingClassifier":
        """Train on ``texts`` labelled with scenario ids (at least two distinct ones); with ``abstain``,
        the confidence threshold comes from cross-validation on the same examples (``abstain_threshold``).

        ``C`` = 10 was chosen on queries written for tests/stages/test_classify.py, never on a release: with
        a few dozen examples per class, weaker regularisation gives better and less flat probabilities."""
        if len(set(labels)) < 2:
            raise ValueError("an embedding classifier needs examples of at least two scenarios")
        import sklearn.linear_model  # noqa: F401  (loads scipy's BLAS, so that the limit below reaches it)
        from threadpoolctl import threadpool_limits

        embed = embed or Encoder(encoder, backend)
        check_encoder(embed, encoder, backend)
        X, y = embed(list(texts)), list(labels)
        # One BLAS/OpenMP thread: on this small problem more only contend (measured on 2 busy cores:
        # one fit 31 s with the default threads, 1.4 s with one).
        with threadpool_limits(limits=1):
            threshold = abstain_threshold(X, y, C) if abstain else 0.0
            return cls(_logistic(C).fit(X, y), encoder, trained_on, threshold, backend, embed)

    @classmethod
    def default(
        cls, encoder: str = DEFAULT_MODEL, backend: str = "torch", embed: Embed | None = None
    ) -> "EmbeddingClassifier":
        """Trained on the descriptions and examples of ``prompts/taxonomy.yaml`` (see ``embedding_classifier``)."""
        return embedding_classifier(None, encoder, backend, embed)

    @classmethod
    def from_queries(
        cls,
        queries: Sequence[Query],
        encoder: str = DEFAULT_MODEL,
        trained_on: str = "labelled queries",
        *,
        backend: str = "torch",
        embed: Embed | None = None,
    ) -> "EmbeddingClassifier":
        """Trained on queries that carry a ``scenario_id`` (unlabelled ones are ignored)."""
        labelled = [(q.conversation, q.scenario_id) for q in queries if q.scenario_id]
        return cls.fit(
            [classifier_text(conversation) for conversation, _ in labelled],
            [scenario_id for _, scenario_id in labelled],
            encoder,
            trained_on,
            backend=backend,
            embed=embed,
        )

    @classmethod
    def from_release(
        cls, release: Release, encoder: str = DEFAULT_MODEL, *, backend: str = "torch", embed: Embed | None = None
    ) -> "EmbeddingClassifier":
        """Trained on each distinct conversation of a labelled release, with its file's scenario."""
        from rmb_build.stages.sources.records import release_queries

        return cls.from_queries(
            release_queries(release), encoder, f"release {release.name}", backend=backend, embed=embed
        )

    def fingerprint(self) -> str:
        """Identifies this classifier in stage cache keys."""
        return (
            f"embedding-lr:{model_fingerprint(self.encoder, self.backend)}:{self.trained_on}:{len(self.labels)}"
            f":abstain<{self.threshold:.4f}"
        )

    def predict_proba(self, texts: Sequence[str]) -> np.ndarray:
        return self.model.predict_proba(self.embed(list(texts)))

    def predict_texts(self, texts: Sequence[str]) -> list[Prediction]:
        if not texts:
            return []
        proba = self.predict_proba(texts)
        best = proba.argmax(axis=1)
        return [
            Prediction(self.labels[k], float(p[k]))
            if p[k] >= self.threshold
            else Prediction(None, float(p[k]), abstained=True)
            for k, p in zip(best, proba)
        ]

    def predict(self, queries: Sequence[Query]) -> list[Prediction]:
        return self.predict_texts([classifier_text(q.conversation) for q in queries])


def _logistic(C: float) -> Any:
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression(C=C, max_iter=2000, class_weight="balanced")


# A prediction is kept when, on held-out examples, predictions that confident were right at least
# this often: below it the top scenario is more likely wrong than right.
ABSTAIN_BELOW_PRECISION = 0.5


def abstain_threshold(
    X: np.ndarray, labels: Sequence[str], C: float = 10.0, folds: int = 5, target: float = ABSTAIN_BELOW_PRECISION
) -> float:
    """The top-probability threshold below which the classifier abstains, chosen by cross-validation
    on its own training examples: out-of-fold predictions' correctness is fitted against their top
    probability by isotonic regression, and the threshold is the lowest probability where the fit
    reaches ``target``. 0 (never abstain) when a class has too few examples to cross-validate."""
    from sklearn.isotonic import IsotonicRegression
    from sklearn.model_selection import StratifiedKFold, cross_val_predict

    y = np.asarray(labels)
    folds = min(folds, min(np.unique(y, return_counts=True)[1]))
    if folds < 2:
        return 0.0
    cv = StratifiedKFold(n_splits=folds, shuffle=True, random_state=0)
    proba = cross_val_predict(_logistic(C), X, y, cv=cv, method="predict_proba")
    classes = np.unique(y)  # cross_val_predict orders columns as the sorted classes
    conf, correct = proba.max(axis=1), (classes[proba.argmax(axis=1)] == y).astype(float)
    fitted = IsotonicRegression(out_of_bounds="clip").fit(conf, correct).predict(np.sort(conf))
    reached = np.flatnonzero(fitted >= target)
    return float(np.sort(conf)[reached[0]]) if reached.size else 1.0


# Classifiers trained in this process, by (training release or taxonomy hash, encoder, backend).
_TRAINED: dict[tuple[str, str, str], EmbeddingClassifier] = {}
_TRAINED_LOCK = threading.Lock()


def embedding_classifier(
    train_release: str | None = None, encoder: str = DEFAULT_MODEL, backend: str = "torch", embed: Embed | None = None
) -> EmbeddingClassifier:
    """The default classifier (``train_release`` None) or one trained on a labelled release (a path or
    Hub id), trained once per process and encoder; ``embed`` gives its training vectors then (e.g. the
    build's embedding store) and the classifier returned embeds with it."""
    key = (train_release or f"taxonomy@{prompt_hash(TAXONOMY_FILE)}", encoder, backend)
    with _TRAINED_LOCK:
        if key not in _TRAINED:
            if train_release:
                from rmb_build.benchmarks.formats import RMB, open_release

                clf = EmbeddingClassifier.from_release(
                    open_release(train_release, RMB), encoder, backend=backend, embed=embed
                )
            else:
                clf = _train_default(encoder, backend, prompt_hash(TAXONOMY_FILE), embed)
            _TRAINED[key] = clf.using(Encoder(encoder, backend))  # not ``embed``: it may be one task's store object
    return _TRAINED[key].using(embed) if embed is not None else _TRAINED[key]


def default_training_set() -> tuple[list[str], list[str]]:
    """The default classifier's examples: each scenario's description and written examples, as
    (classifier texts, scenario ids)."""
    texts, labels = [], []
    for sid, entry in load_taxonomy().items():
        for conversation in [(Turn("user", entry["description"]),), *map(example_conversation, entry["examples"])]:
            texts.append(classifier_text(conversation))
            labels.append(sid)
    return texts, labels


def _train_default(encoder: str, backend: str, taxonomy_hash: str, embed: Embed | None) -> EmbeddingClassifier:
    """The default classifier, from ``trained_classifier_dir()`` when this taxonomy, encoder, code and
    scikit-learn trained it before (in any process), else trained here and kept there."""
    trained_on = f"taxonomy.yaml@{taxonomy_hash}"
    path = trained_classifier_dir() / f"default-{_default_key(encoder, backend, taxonomy_hash)}.npz"
    saved = _load_logistic(path)
    if saved is not None:
        model, threshold = saved
        return EmbeddingClassifier(model, encoder, trained_on, threshold, backend, embed)
    texts, labels = default_training_set()
    clf = EmbeddingClassifier.fit(texts, labels, encoder, trained_on=trained_on, backend=backend, embed=embed)
    _save_logistic(path, clf.model, clf.threshold)
    return clf


def trained_classifier_dir() -> Path:
    """Where trained default classifiers are kept between processes: ``$RMB_CLASSIFIER_CACHE``, else
    ``<user cache>/classifiers``. Training embeds the taxonomy's ~1,500 examples and cross-validates the
    abstention threshold (tens of seconds on a laptop's CPU); every later ``rmb`` process reads the
    result (a few hundred KB)."""
    return Path(os.environ.get("RMB_CLASSIFIER_CACHE") or user_cache_dir() / "classifiers")


# the libraries whose versions can move the trained classifier: the encoder's stack and the fit's
TRAINING_LIBRARIES = (
    *("torch", "transformers", "sentence-transformers", "tokenizers", "onnxruntime", "onnx"),
    *("scipy", "scikit-learn", "numpy"),
)


def _default_key(encoder: str, backend: str, taxonomy_hash: str) -> str:
    """Changes whenever the trained classifier could: the taxonomy, the encoder, the code this module reaches
    (the fit, the threshold's cross-validation, the encoder's embedding: ``core.code_version``) and the versions
    of the libraries the encoding and the fit run on."""
    from importlib.metadata import PackageNotFoundError, version

    from rmb_build.core.code_version import code_version

    def installed(name: str) -> str:
        try:
            return f"{name}=={version(name)}"
        except PackageNotFoundError:
            return f"{name} absent"

    digest = hashlib.sha256(code_version(__name__).encode())
    for part in (taxonomy_hash, model_fingerprint(encoder, backend), *map(installed, TRAINING_LIBRARIES)):
        digest.update(b"\0" + part.encode())
    return digest.hexdigest()[:32]


def _save_logistic(path: Path, model: Any, threshold: float) -> None:
    """The fitted logistic regression's arrays and the threshold as a plain .npz (no pickle); a cache
    that cannot be written only costs the next process a new fit."""
    buffer = io.BytesIO()
    np.savez(
        buffer,
        coef=model.coef_,
        intercept=model.intercept_,
        classes=np.asarray([str(c) for c in model.classes_]),
        n_iter=model.n_iter_,
        C=np.float64(model.C),
        threshold=np.float64(threshold),
    )
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic.write_bytes(path, buffer.getvalue())
    except OSError as exc:
        log.debug("trained classifier not kept at %s: %s", path, exc)


def _load_logistic(path: Path) -> tuple[Any, float] | None:
    """(model, threshold) saved by ``_save_logistic``, or None when absent or unreadable (trained again)."""
    try:
        with np.load(path, allow_pickle=False) as saved:
            model = _logistic(float(saved["C"]))
            model.coef_, model.intercept_ = saved["coef"], saved["intercept"]
            model.classes_, model.n_iter_ = saved["classes"], saved["n_iter"]
            model.n_features_in_ = model.coef_.shape[1]
            threshold = float(saved["threshold"])
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, IndexError) as exc:
        log.warning("%s: unreadable trained classifier (%s): training again", path, exc)
        return None
    return model, threshold


def classify(queries: Sequence[Query], clf: Classifier, min_confidence: float = 0.0) -> list[Query]:
    """Queries with ``scenario_id`` and ``confidence`` set (see :func:`apply_predictions`)."""
    return apply_predictions(queries, clf.predict(list(queries)), min_confidence)


def apply_predictions(
    queries: Sequence[Query], preds: Sequence[Prediction], min_confidence: float = 0.0
) -> list[Query]:
    """``queries`` with their predictions' scenario and confidence. Where the classifier abstained or
    the confidence is below ``min_confidence`` the scenario is None and the confidence stays
    (``abstained`` tells these apart from queries the classifier could not answer at all). A label
    people gave (``Query.labelled_by``) is kept as it is."""
    out = []
    for q, p in zip(queries, preds):
        if q.labelled_by and q.scenario_id:
            out.append(q)
            continue
        confident = p.scenario_id is not None and (p.confidence is None or p.confidence >= min_confidence)
        out.append(dataclasses.replace(q, scenario_id=p.scenario_id if confident else None, confidence=p.confidence))
    return out


def abstained(query: Query) -> bool:
    """Classified, but with no scenario: the classifier's confidence was below its threshold."""
    return query.scenario_id is None and query.confidence is not None


class LLMClassifier:
    """A chat model picks the scenario; the reply is constrained by a JSON schema.

    ``client`` is an ``rmb_build.llm.LLMClient`` (anything with ``run(requests, desc=) -> results``).
    Queries whose reply failed fall back to ``fallback`` (e.g. the embedding classifier) when given,
    else get ``Prediction(None)``. ``confidence`` is the model's own 0-1 estimate, as it states it.
    Like the other LLM stages it has ``plan`` (the requests) and ``collect`` (their results ->
    predictions), so a build can estimate, send and count its requests with the others.
    """

    SYSTEM = "classify/system.md"
    USER = "classify/user.md"
    STAGE = "classify"  # the stage's one name: its SPEC's, its requests' stage

    def __init__(
        self,
        client: ChatClient,
        endpoint: str,
        model: str,
        *,
        fallback: Classifier | None = None,
        max_tokens: int = 96,
        max_chars: int = 6000,
    ):
        self.client, self.endpoint, self.model = client, endpoint, model
        self.fallback = fallback
        self.max_tokens, self.max_chars = max_tokens, max_chars

    @staticmethod
    def schema() -> dict[str, Any]:
        return {
            "type": "object",
            "additionalProperties": False,
            "required": ["scenario", "confidence"],
            "properties": {
                "scenario": {"type": "string", "enum": [s.id for s in all_scenarios()]},
                "confidence": {"type": "number", "minimum": 0, "maximum": 1},
            },
        }

    def fingerprint(self) -> str:
        return f"llm:{self.endpoint}:{self.model}:{prompt_hash(self.SYSTEM)}:{prompt_hash(self.USER)}:{prompt_hash(TAXONOMY_FILE)}"

    def plan(self, queries: Sequence[Query]) -> list[Any]:
        """One ChatRequest per query, in order."""
        from rmb_build.core.text import fill, render_conversation
        from rmb_build.llm.types import ChatRequest
        from rmb_build.stages.common import cut_middle

        taxonomy = "\n".join(f"- {sid}: {e['description']}" for sid, e in load_taxonomy().items())
        system = fill(load_prompt(self.SYSTEM), taxonomy=taxonomy)
        out = []
        for q in queries:
            convo = render_conversation((t.role, cut_middle(t.content, self.max_chars)) for t in q.conversation)
            user = fill(load_prompt(self.USER), conversation=convo)
            out.append(
                ChatRequest(
                    self.endpoint,
                    self.model,
                    (("system", system), ("user", user)),
                    temperature=0.0,
                    max_tokens=self.max_tokens,
                    response_schema=self.schema(),
                    schema_name="scenario",
                    stage=self.STAGE,
                    tag=q.id,
                )
            )
        return out

    def collect(self, queries: Sequence[Query], results: Sequence[Any]) -> list[Prediction]:
        """Predictions from the results of ``plan(queries)``; unusable replies go to the fallback."""
        preds: list[Prediction | None] = []
        for res in results:
            parsed = res.parsed if res.error is None else None
            if not isinstance(parsed, dict):
                parsed = {}
            sid = parsed.get("scenario")
            if isinstance(sid, str) and is_known(sid):
                conf = parsed.get("confidence")
                preds.append(Prediction(sid, float(conf) if isinstance(conf, (int, float)) else None))
            else:
                preds.append(None)
        missing = [i for i, p in enumerate(preds) if p is None]
        if missing and self.fallback is not None:
            for i, p in zip(missing, self.fallback.predict([queries[i] for i in missing])):
                preds[i] = p
        return [p or Prediction(None) for p in preds]

    def predict(self, queries: Sequence[Query]) -> list[Prediction]:
        return self.collect(queries, self.client.run(self.plan(queries), desc=self.STAGE))


def build_classifier(
    train_release: str | None, embeddings: EmbeddingsConfig | None = None, embed: Embed | None = None
) -> EmbeddingClassifier:
    """The build's embedding classifier: on ``embeddings``' encoder (``EmbeddingsConfig``; None: the
    default one), its vectors from ``embed`` (the build's store) when given."""
    if embeddings is None:
        return embedding_classifier(train_release)
    return embedding_classifier(train_release, embeddings.model, embeddings.backend, embed)


def classify_batch(env: StageEnv, queries: Sequence[Query]) -> StageResult[list[Query]]:
    """The offline embedding classifier."""
    clf = build_classifier(env.section.train_release, env.embeddings, env.store)
    return _classified(classify(queries, clf, env.section.min_confidence))


async def classify_llm_batch(env: StageEnv, queries: Sequence[Query]) -> StageResult[list[Query]]:
    """The LLM classifier through the build's client (the embedding one for unusable replies)."""
    from rmb_build.stages.common import ask

    cfg = env.section
    fallback = await asyncio.to_thread(build_classifier, cfg.train_release, env.embeddings, env.store)
    clf = LLMClassifier(env.chat(), cfg.endpoint, cfg.model, fallback=fallback)
    results = await ask(env.chat(), clf.plan(queries), desc=clf.STAGE)
    preds = await asyncio.to_thread(clf.collect, queries, results)  # the fallback encodes on the CPU
    return _classified(apply_predictions(queries, preds, cfg.min_confidence))


def _classified(queries: list[Query]) -> StageResult[list[Query]]:
    """The classified queries, counted (the stage's ``items``)."""
    return StageResult(queries, stats={"items": len(queries)})


def _training_file(cfg: BuildConfig) -> list[object]:
    from rmb_build.stages.sources import file_identity

    return [file_identity(cfg.classifier.train_release)]


def embedded_texts(cfg: ClassifierConfig, queries: Sequence[Query]) -> list[str]:
    """The texts the embedding classifier's batches look up in the build's store: the queries' classifier
    texts and, without a training release (``cfg``: ``classifier:``), the default training set's."""
    texts = [classifier_text(q.conversation) for q in queries]
    return texts + (default_training_set()[0] if not cfg.train_release else [])


async def classify_on_runner(run: BuildRun, flow: Flow) -> None:
    """The embedding classifier over the pool's batches on the task runner (its texts embedded first, the
    queries waiting on disk)."""
    queries = embedded_first(run, SPEC, flow, run.paths.run / P.DEDUPED_QUERIES)
    futures = [run.submit(SPEC, b) for b in batched(queries, run.cfg.run.batch_size)]
    flow.queries = [q for part in run.record(SPEC, [f.result() for f in futures]) for q in part.records]
    flow.classified = True


async def classify_by_llm(run: BuildRun, flow: Flow) -> None:
    """The LLM classifier over the pool's batches, awaited together."""
    queries = flow.take_queries()
    runs = [run.acall(LLM_SPEC, b) for b in batched(queries, run.cfg.run.batch_size)]
    flow.queries = [q for part in run.record(LLM_SPEC, await asyncio.gather(*runs)) for q in part.records]
    flow.classified = True


SPEC = StageSpec(
    LLMClassifier.STAGE,
    classify_batch,
    config="classifier",
    endpoints=lambda c: [c.endpoint] if c.method == "llm" else None,
    identity=_training_file,
    encoder=True,
    prompts=("classify", TAXONOMY_FILE),
    optional=True,
    embeds=embedded_texts,
    at=Position.POOL,
    when=lambda c: c.method != "llm",
    on_run=classify_on_runner,
)
# Both forms read the same key (the LLM's endpoint only where the method is "llm"); the LLM form's batches are
# classify's
LLM_SPEC = dataclasses.replace(
    SPEC,
    name="classify_llm",
    work=classify_llm_batch,
    llm=True,
    listed=False,
    optional=False,
    of=SPEC.name,
    embeds=None,
    when=lambda c: c.method == "llm",
    on_run=classify_by_llm,
)
