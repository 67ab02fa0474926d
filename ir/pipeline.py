"""A pipeline: a chain of kernels (stages) computing one result, each stage a program with
where each of its inputs comes from; evaluated stage by stage with the reference
interpreter (:func:`run_pipeline`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ir.errors import UnknownStageError
from ir.nodes import Lambda
from ir.sym import Expr

__all__ = ["PREVIOUS", "Pipeline", "Stage", "run_pipeline", "stage_source", "source_stage"]

PREVIOUS = "<previous>"  # the source that reads the stage before's output
_STAGE = "<stage:"


def stage_source(name: str) -> str:
    """The source that reads the output of the stage called ``name``."""
    return f"{_STAGE}{name}>"


def source_stage(src: str) -> str | None:
    """The stage whose output the source ``src`` reads, or None (an input, ``<previous>``)."""
    return src[len(_STAGE):-1] if src.startswith(_STAGE) and src.endswith(">") else None


@dataclass(frozen=True)
class Stage:
    """One kernel of a pipeline: a program and where each of its inputs comes from.

    ``sources`` maps each input name to a pipeline input name, ``"<previous>"`` (the
    stage before's output) or ``stage_source(name)`` (an earlier stage's output).
    ``identity_when``: pairs of sizes whose equality makes the stage copy its one input
    unchanged (a crop of nothing): at such sizes the lowering leaves the kernel out and the
    next stage reads the input (``identity_at``).
    ``folds_when`` and ``fold``: pairs of sizes whose equality makes the stage only lay its
    one input out again (a sum over one element, then views), and the function that puts
    that layout on the stage before's program (its result written through it): at such
    sizes the lowering builds ``fold(before)`` in place of both (``folds_at``), one pass
    over the result fewer. ``fold`` must be a module-level function (it goes to workers).
    """

    name: str
    program: Lambda
    sources: tuple[tuple[str, str], ...]
    identity_when: tuple[tuple[Expr, Expr], ...] = ()
    folds_when: tuple[tuple[Expr, Expr], ...] = ()
    fold: Callable[[Lambda], Lambda] | None = None

    @property
    def reads_only_previous(self) -> bool:
        """Whether the stage's one input is the stage before's output."""
        return [src for _, src in self.sources] == [PREVIOUS]

    def identity_at(self, sizes: Mapping[str, int]) -> bool:
        """Whether the stage copies its input unchanged at ``sizes``."""
        return bool(self.identity_when) and all(
            a.evaluate(sizes) == b.evaluate(sizes) for a, b in self.identity_when)

    def folds_at(self, sizes: Mapping[str, int]) -> bool:
        """Whether the stage folds into the stage before at ``sizes`` (see ``fold``)."""
        return self.fold is not None and bool(self.folds_when) and all(
            a.evaluate(sizes) == b.evaluate(sizes) for a, b in self.folds_when)


@dataclass(frozen=True)
class Pipeline:
    """A chain of kernels (stages) computing one result."""

    name: str
    inputs: tuple[str, ...]
    stages: tuple[Stage, ...]

    def stage(self, name: str) -> Stage:
        for s in self.stages:
            if s.name == name:
                return s
        raise UnknownStageError(f"no stage {name!r}; stages: {[s.name for s in self.stages]}")


def run_pipeline(pipeline: Pipeline, inputs: Mapping[str, object], sizes: Mapping[str, int],
                 evaluate=None):
    """Evaluates the stages in order with the reference interpreter (or ``evaluate``)."""
    if evaluate is None:
        from ir.interp import evaluate
    prev = None
    outs: dict[str, object] = {}
    for st in pipeline.stages:
        args = {}
        for name, src in st.sources:
            earlier = source_stage(src)
            if earlier is not None:
                if earlier not in outs:
                    raise UnknownStageError(f"stage {st.name} reads {earlier!r}, not an "
                                            "earlier stage")
                args[name] = outs[earlier]
            else:
                args[name] = prev if src == PREVIOUS else inputs[src]
        prev = outs[st.name] = evaluate(st.program, args, sizes)
    return prev
