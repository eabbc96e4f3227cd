"""Status: the outcome of a plugin call, with kube-scheduler's codes.

Expected outcomes are values, not exceptions: a Filter that rejects returns
Unschedulable with a reason phrased like upstream ("Insufficient cpu"), a
Permit that holds returns Wait. Exceptions are for bugs and I/O failures;
the framework turns an exception escaping a plugin into Status(ERROR).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum


class Code(IntEnum):
    """framework.Code, same values and meaning."""

    SUCCESS = 0
    ERROR = 1                            # internal error: the pod is retried with backoff
    UNSCHEDULABLE = 2                    # may fit after preemption (PostFilter runs)
    UNSCHEDULABLE_AND_UNRESOLVABLE = 3   # preemption cannot help on that node
    WAIT = 4                             # Permit: hold the pod
    SKIP = 5                             # PreFilter/PreScore: skip this plugin's Filter/Score; Bind: not mine
    PENDING = 6                          # waiting on something outside the scheduler; no PostFilter

    def label(self) -> str:
        return _LABELS[self]


_LABELS = {
    Code.SUCCESS: "Success",
    Code.ERROR: "Error",
    Code.UNSCHEDULABLE: "Unschedulable",
    Code.UNSCHEDULABLE_AND_UNRESOLVABLE: "UnschedulableAndUnresolvable",
    Code.WAIT: "Wait",
    Code.SKIP: "Skip",
    Code.PENDING: "Pending",
}


@dataclass(frozen=True, slots=True, init=False, eq=False, repr=False)
class Status:
    """A code, the reasons behind it, and the plugin that said so. Immutable: one instance may be shared
    (``SUCCESS``, a plugin's module-level success) by every caller, so nothing may change it in place."""

    code: Code
    reasons: tuple[str, ...]
    plugin: str
    error: BaseException | None

    def __init__(self, code: Code = Code.SUCCESS, *reasons: str, plugin: str = "",
                 error: BaseException | None = None) -> None:
        # the slots' own setters: what frozen's __setattr__ refuses, and cheaper than object.__setattr__
        _set_code(self, code)
        _set_reasons(self, reasons)
        _set_plugin(self, plugin)
        _set_error(self, error)

    @classmethod
    def from_error(cls, error: BaseException, plugin: str = "") -> "Status":
        """Status(ERROR) for an exception: the error's own words, ``RuntimeError: boom``.

        This is the part kube-scheduler prints as a Go error's text (``boom``); tandem keeps the
        exception's type in front of it, since a raised exception is a bug and its type says which
        (``KeyError: 'zone'`` reads better than ``'zone'``), and an exception with no text is named by its
        type alone. The wrapper naming the extension point and the plugin comes from the framework
        (``running PreFilter plugin "X": RuntimeError: boom``, see runtime.plugin_error).
        """
        return cls(Code.ERROR, f"{type(error).__name__}: {error}" if str(error) else type(error).__name__,
                   plugin=plugin, error=error)

    def is_success(self) -> bool:
        return self.code == Code.SUCCESS

    def is_skip(self) -> bool:
        return self.code == Code.SKIP

    def is_wait(self) -> bool:
        return self.code == Code.WAIT

    def is_rejected(self) -> bool:
        """Unschedulable, UnschedulableAndUnresolvable or Pending (IsRejected upstream)."""
        return self.code in (Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE, Code.PENDING)

    def message(self) -> str:
        return ", ".join(self.reasons)

    def with_plugin(self, plugin: str) -> "Status":
        """This status attributed to ``plugin``: itself if it already names a plugin (the name it came with
        wins), else a copy naming ``plugin``. Never changes self, so shared statuses stay anonymous."""
        if self.plugin:
            return self
        named = _new(Status)   # __init__ without repacking the reasons: this runs once per bound pod
        _set_code(named, self.code)
        _set_reasons(named, self.reasons)
        _set_plugin(named, plugin)
        _set_error(named, self.error)
        return named

    def __repr__(self) -> str:
        who = f" by {self.plugin}" if self.plugin else ""
        return f"Status({self.code.label()}{who}: {self.message()!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Status):
            return NotImplemented
        return self.code == other.code and self.reasons == other.reasons

    def __hash__(self) -> int:
        return hash((self.code, self.reasons))


_new = object.__new__
_set_code, _set_reasons, _set_plugin, _set_error = (
    Status.__dict__[name].__set__ for name in ("code", "reasons", "plugin", "error"))

SUCCESS = Status()  # shared, like every Status safe to share: nothing can change it

