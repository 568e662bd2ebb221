"""What a comparison looks like to a CI user: terminal lines, warnings text, GitHub
annotations and the job-summary section (escaping is ``pytest_accel.github``'s)."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

from pytest_accel.github import (
    MAX_ANNOTATIONS,
    MAX_SUMMARY_BYTES,
    Location,
    Section,
    annotation,
    escape_cell,
    fit,
    mermaid_line_chart,
)
from pytest_accel.perf.model.findings import (
    ALARM_KINDS,
    Alarm,
    Change,
    Comparison,
    Compilation,
    Finding,
    MemoryGrowth,
    MemoryVerdict,
    Recompiled,
    RunnerLoad,
    busy_share,
    busy_slack,
)
from pytest_accel.perf.model.notes import (
    BasisLeftOut,
    Busy,
    ChangesOfLayout,
    DeviceMemory,
    FewOfLayout,
    Interrupted,
    LayoutsLeftOut,
    Learning,
    Note,
    OrderUnconfirmed,
    RecompilesAcross,
    RecompilesNotJudged,
    SetAside,
    TracingNotJudged,
    WarmupNotJudged,
    notes_of,
    set_aside_of,
)
from pytest_accel.perf.model.table import RunCompilation, TimingTable
from pytest_accel.text import Line, Tone, one_line, size


def seconds(value: float) -> str:
    """``0.213s``, ``1.52s``, ``12.3s``: three significant digits."""
    return f"{value:.3g}s"


def subject(kind: str, ident: str, *, tracing: bool = False) -> str:
    """``test t.py::a``; ``test t.py::a tracing`` where its JAX tracing was judged."""
    return f"{kind} {ident} tracing" if tracing else f"{kind} {ident}"


def describe(finding: Finding) -> str:
    """``test t.py::a: 0.430s vs baseline 0.210s (2.05x, 20 sample(s))``; with a runner-
    speed correction, both ratios."""
    basis = (
        f"over {finding.samples} test(s)"
        if finding.kind == "session"
        else f"{finding.samples} sample(s)"
    )
    ratio = f"{finding.ratio:.2f}x"
    if finding.corrected is not None:
        ratio += f" as measured, {finding.corrected:.2f}x for this runner's speed"
    if finding.warmup:
        basis += ", first in its process, as in them"
    if finding.pending:
        basis += ", the newest run left out: it was as slow"
    if finding.compiling is not None:
        basis += f"; execution time, {finding.compiling:.3f}s compiling beside it"
    return one_line(
        f"{subject(finding.kind, finding.id, tracing=finding.tracing)}: {finding.current:.3f}s"
        f" vs baseline {finding.baseline:.3f}s ({ratio}, {basis}){_movers(finding)}"
    )


def _movers(found: Finding | Change) -> str:
    """``; moved most: t.py::a (+30 ms), ...`` for a group's finding or change."""
    if not found.movers:
        return ""
    named = ", ".join(f"{ident} (+{seconds * 1000:.0f} ms)" for ident, seconds in found.movers)
    return f"; moved most: {named}"


def describe_learning(finding: Finding, comparison: Comparison) -> str:
    """``test t.py::a: 0.430s vs baseline 0.210s (2.05x) on 2 of the 3 samples a verdict
    needs``: slower, but too new to tell from noise (docs/regressions.md)."""
    needed = comparison.timing.min_samples
    if finding.kind == "session":
        basis = f"over {finding.samples} test(s), on {comparison.timing.runs} of the {needed} runs"
    else:
        basis = f"on {finding.samples} of the {needed} samples"
    return one_line(
        f"{subject(finding.kind, finding.id, tracing=finding.tracing)}: {finding.current:.3f}s"
        " vs baseline"
        f" {finding.baseline:.3f}s ({finding.ratio:.2f}x) {basis} a verdict needs:"
        " no alarm yet"
    )


def describe_change(change: Change) -> str:
    """``test t.py::a: 0.21s -> 0.43s (2.05x) since abc1234, 3 runs``."""
    return one_line(
        f"{subject(change.kind, change.id, tracing=change.tracing)}:"
        f" {seconds(change.before)} -> {seconds(change.after)}"
        f" ({change.ratio:.2f}x) since {change.since.describe()}, {change.runs} runs"
        f"{_movers(change)}"
    )


# What a recompiling test usually does, in JAX (a jitted closure made anew, a static
# argument that changes) and in torch.compile (a new shape with dynamic=False) alike.
RECOMPILE_HINT = "(compiled anew on every call: a new function, shape or Python scalar each time?)"


def describe_recompiled(found: Recompiled, hint: bool = True) -> str:
    """``test t.py::a: 20 compilations of <lambda> (judged on ...)``: the function it
    compiled anew, where known, then what was judged (its recompilations, or under xdist
    its most compiled function's compilations) against the baseline's runs."""
    tail = f" {RECOMPILE_HINT}" if hint else ""
    if found.culprit is not None and found.compilations is not None:
        judged = (
            f"its most compiled function {found.current} times"
            if found.of_one_function
            else f"{found.current} recompilation(s)"
        )
        return one_line(
            f"test {found.id}: {found.compilations} compilations of {found.culprit.function}"
            f" (judged: {judged}, at most {found.baseline} in {found.samples} baseline"
            f" run(s)){tail}"
        )
    if found.of_one_function:
        return one_line(
            f"test {found.id}: {found.current} compilations of one function, at most"
            f" {found.baseline} in {found.samples} baseline run(s) {RECOMPILE_HINT}"
        )
    return one_line(
        f"test {found.id}: {found.current} recompilation(s) of functions it had compiled"
        f" already, at most {found.baseline} in {found.samples} baseline run(s) {RECOMPILE_HINT}"
    )


def describe_memory(found: MemoryGrowth) -> str:
    """``test t.py::a: peak device memory 3.00 GiB vs at most 1.00 GiB (3.00x) in 5
    baseline run(s)``."""
    ratio = "" if found.ratio == float("inf") else f" ({found.ratio:.2f}x)"
    return one_line(
        f"test {found.id}: peak device memory {'at least ' if found.at_least else ''}"
        f"{size(found.current)} vs at most {size(found.baseline)}{ratio} in"
        f" {found.samples} baseline run(s)"
    )


def memory_note(memory: MemoryVerdict, needed: int) -> str:
    """``device memory: highest peak 1.20 GiB (t.py::a); judged against 5 run(s)``."""
    assert memory.peak is not None  # a note is made only for a run that measured it
    test, count = memory.peak
    judged = (
        f"judged against {memory.runs} baseline run(s)"
        if memory.judged
        else f"not judged: {memory.runs} baseline run(s) measured it and a verdict needs {needed}"
    )
    return one_line(f"device memory: highest peak {size(count)} ({test}); {judged}")


def device_memory_line(table: TimingTable) -> str:
    """``device memory: highest peak 1.20 GiB (t.py::a on gpu:0), 40 test(s) measured``."""
    row, peaks = max(table.device_memory.items(), key=lambda item: max(item[1].values()))
    device = max(peaks, key=lambda name: peaks[name])
    bound = " at least" if row in table.memory_bounded else ""
    return one_line(
        f"device memory: highest peak{bound} {size(peaks[device])}"
        f" ({table.nodeids[row]} on {device}), {len(table.device_memory)} test(s) measured"
    )


def describe_compilation(compilation: Compilation) -> str | None:
    """``suite: 14.2s compiling vs 6.10s (2.33x) in the baseline runs of this layout``,
    where compile time grew; None where it did not."""
    ratio = compilation.ratio
    if not compilation.grew or compilation.baseline is None or ratio is None:
        return None
    return one_line(
        f"suite: {seconds(compilation.seconds)} compiling vs {seconds(compilation.baseline)}"
        f" ({ratio:.2f}x) in the"
        f" {compilation.samples} baseline run(s) of this layout"
    )


# Each alarm kind's label in the terminal and its annotation's title (``ALARM_KINDS``).
ALARM_LABELS = {
    "regression": "REGRESSION",
    "slowdown": "CHANGED",
    "recompiled": "RECOMPILED",
    "memory": "MEMORY",
}
ALARM_TITLES = {
    "regression": "perf regression",
    "slowdown": "perf change",
    "recompiled": "recompilation",
    "memory": "device memory",
}
_ALARM_COUNTS = {
    "regression": "regression(s)",
    "slowdown": "slowdown change(s)",
    "recompiled": "recompiling test(s)",
    "memory": "device memory growth(s)",
    "function": "recompiling function(s)",  # a recompiling function's alarm (``FUNCTION``)
}
FUNCTION = "function"


def describe_alarm(alarm: Alarm) -> str:
    """An alarm in one line, as every output words it; an alarm of a recompiling
    function names it, then its symptoms."""
    head, *symptoms = cause_lines(alarm)
    return one_line(head + (": " + "; ".join(symptoms) if symptoms else ""))


def cause_lines(alarm: Alarm, compile_time: str | None = None) -> list[str]:
    """An alarm as its terminal rows say it: one line, or, for a recompiling function
    (``Alarm.culprit``), the function, then each symptom (its tests' recompilations,
    their slower tracing and execution, the suite total they moved, ``compile_time``)."""
    culprit = alarm.culprit
    if culprit is None:
        said = [_describe_finding(alarm)]
        return said if alarm.changed is None else [*said, alarm.changed.describe()]
    head = (
        f"function {culprit.describe()}: compiled anew on every call in"
        f" {alarm.recompiling_tests} test(s)"
        " (a new function, shape or Python scalar each time?)"
    )
    lines = [head]
    for part in (alarm, *alarm.symptoms):
        found = part.finding
        if isinstance(found, Recompiled):
            lines.append(describe_recompiled(found, hint=False))
        else:
            lines.append(f"{ALARM_LABELS[part.kind]} {_describe_finding(part)}")
    if compile_time is not None:
        lines.append(f"COMPILE TIME {compile_time}")
    return lines


def _describe_finding(alarm: Alarm) -> str:
    found = alarm.finding
    if isinstance(found, Finding):
        return describe(found)
    if isinstance(found, Change):
        return describe_change(found)
    if isinstance(found, MemoryGrowth):
        return describe_memory(found)
    return describe_recompiled(found)


def alarm_count(comparison: Comparison) -> str:
    """``2 regression(s) and 1 slowdown change(s)``: what ``--perf-fail`` fails on."""
    kinds = [FUNCTION if alarm.culprit else alarm.kind for alarm in comparison.alarm_list]
    parts = [f"{kinds.count('regression')} regression(s)"]
    parts += [
        f"{kinds.count(k)} {_ALARM_COUNTS[k]}" for k in (*ALARM_KINDS[1:], FUNCTION) if k in kinds
    ]
    return " and ".join(parts)


def summary_line(comparison: Comparison, failing: bool, fail_option: str = "--perf-fail") -> str:
    """The one-line summary; ``fail_option`` names the option that fails on findings as
    the reader typed it (``--fail`` for ``pytest-accel compare``).  Its tone:
    ``summary_tone``."""
    new = f"{len(comparison.timing.new)} new"
    if comparison.timing.new_slow:
        new += f" ({len(comparison.timing.new_slow)} slow)"
    parts = [
        f"{len(comparison.timing.regressions)} regression(s)",
        f"{len(comparison.timing.changes)} change(s)",
        f"{len(comparison.timing.improvements)} improvement(s)",
        new,
        f"{len(comparison.timing.missing)} missing",
        f"{comparison.timing.compared} test(s) compared under {comparison.key}",
    ]
    if comparison.recompiles.found:
        parts.insert(2, f"{len(comparison.recompiles.found)} recompiling")
    if comparison.device_memory.grew:
        parts.insert(2, f"{len(comparison.device_memory.grew)} memory growth(s)")
    if comparison.timing.learning:
        parts.insert(1, f"{len(comparison.timing.learning)} learning")
    line = "perf: " + ", ".join(parts)
    if comparison.timing.speed != 1.0:
        line += f"; this run was {comparison.timing.speed:.2f}x the baseline overall"
    if failing:
        line += f" -- failing the run ({fail_option})"
    return one_line(line)


def summary_tone(comparison: Comparison) -> Tone:
    return Tone.ALARM if comparison.alarms else Tone.OK


def missing_env_line(comparison: Comparison, source: str) -> str:
    keys = ", ".join(comparison.available_keys) or "none"
    return one_line(
        f"perf: {source} has no timings for {comparison.key!r}; nothing compared"
        f" (it has: {keys}). Use --accel-key to pick one."
    )


def terminal_rows(comparison: Comparison, top: int) -> list[Line]:
    """Every alarm, the most severe first (never cut: an alarm a reader cannot see is
    one too many); then changes to faster, improvements, findings still learning, new
    slow tests, ``top`` rows of each and a line for what is left out; then the notes."""
    grew = None if comparison.compilation is None else describe_compilation(comparison.compilation)
    rows = []
    for alarm in comparison.alarm_list:
        # Compile time that grew is a symptom of the first recompiling function, if any.
        folded = grew if alarm.culprit is not None else None
        head, *symptoms = cause_lines(alarm, folded)
        grew = None if folded is not None else grew
        rows.append(Line(Tone.ALARM, f"{ALARM_LABELS[alarm.kind]} {head}"))
        rows += [Line(Tone.ALARM, f"  {symptom}") for symptom in symptoms]
    sections: list[tuple[str, Tone, list[str]]] = [
        (
            "CHANGED",
            Tone.OK,
            [describe_change(c) for c in comparison.timing.changes if not c.slower],
        ),
        ("improved  ", Tone.OK, [describe(f) for f in comparison.timing.improvements]),
        (
            "LEARNING",
            Tone.CHANGE,
            [describe_learning(f, comparison) for f in comparison.timing.learning],
        ),
        (
            "NEW SLOW",
            Tone.CHANGE,
            [f"test {t}: {seconds(s)} (no baseline yet)" for t, s in comparison.timing.new_slow],
        ),
    ]
    if grew is not None:
        sections.append(("COMPILE TIME", Tone.CHANGE, [grew]))
    for label, tone, lines in sections:
        rows += [Line(tone, f"{label} {line}") for line in lines[:top]]
        if len(lines) > top:
            rows.append(
                Line(tone, f"... and {len(lines) - top} more {label.strip().lower()} row(s)")
            )
    rows += [Line(Tone.NOTE, word_set_aside(found)) for found in set_aside_of(comparison)]
    return rows + [Line(Tone.NOTE, note) for note in scope_notes(comparison)]


def scope_notes(comparison: Comparison) -> list[str]:
    """What the timings were judged on, and which baseline runs were left out, where
    that is not simply all of them (``notes.notes_of``), worded."""
    return [one_line(word_note(note)) for note in notes_of(comparison)]


def word_note(note: Note) -> str:
    """One note about how a run was judged, in words (``perf.model.notes``)."""
    if isinstance(note, Interrupted):
        return (
            "interrupted: the run was interrupted (exit status 2): a part of the suite,"
            " compared as it is; no gate passes on it"
        )
    if isinstance(note, Learning):
        return (
            f"learning: {note.runs} of {note.needed} runs: the baseline has {note.runs}"
            f" run(s) of {note.key} to compare with and a verdict needs {note.needed}"
            " (--perf-min-samples); nothing is a regression until then"
        )
    if isinstance(note, Busy):
        return busy_note(note.load)
    if isinstance(note, BasisLeftOut):
        other = "wall" if note.time == "execution" else "execution"
        return (
            f"time: judged on {note.time} time; {note.runs} baseline run(s) timed on"
            f" {other} time left out"
        )
    if isinstance(note, LayoutsLeftOut):
        return (
            f"layout: compared with the baseline's runs laid out as this one ({note.layout});"
            f" {note.runs} run(s) of other layouts left out"
        )
    if isinstance(note, FewOfLayout):
        return (
            f"layout: too few baseline runs laid out as this one ({note.layout}; most were"
            f" {note.usual}): tests judged if their class or module moved too, classes,"
            " modules and the suite total not judged"
        )
    if isinstance(note, ChangesOfLayout):
        if note.runs:
            return (
                f"layout: changes over runs judged on the {note.runs} baseline run(s) laid"
                f" out as this one ({note.layout}): a switch of layout is not a change"
            )
        return (
            "layout: changes over runs not judged; no baseline run was laid out as this one"
            f" ({note.layout}), and a switch of layout is not a change"
        )
    if isinstance(note, TracingNotJudged):
        return (
            f"tracing: not judged; too few baseline runs laid out as this one ({note.layout}),"
            " and which test traces a shared function first depends on it"
        )
    if isinstance(note, RecompilesAcross):
        return (
            "recompilations: judged on each test's most compiled function against"
            f" {note.runs} baseline run(s) of other layouts (too few laid out as this one,"
            f" {note.layout})"
        )
    if isinstance(note, RecompilesNotJudged):
        if not note.runs:
            return (
                "recompilations: not judged; no baseline run was laid out as this one"
                f" ({note.layout})"
            )
        return (
            f"recompilations: not judged; {note.runs} baseline run(s) laid out as this one"
            f" ({note.layout}), and a verdict needs {note.needed} (--perf-min-samples)"
        )
    if isinstance(note, DeviceMemory):
        return memory_note(note.memory, note.needed)
    return _unattributed_note(note.steps)


def word_set_aside(found: SetAside) -> str:
    """What a comparison set aside as no finding, and why, in words."""
    if isinstance(found, WarmupNotJudged):
        return (
            f"not judged: {len(found.tests)} test(s) ran first in their process and paid"
            " its warm-up, which no baseline run saw them pay"
            f" ({_first(found.tests)})"
        )
    if isinstance(found, OrderUnconfirmed):
        if found.layout is not None:
            return (
                f"order: this run was {found.layout}, the baseline's runs {found.usual};"
                f" {len(found.tests)} test(s) that moved while their class and module held"
                f" are not findings ({_first(found.tests)})"
            )
        return (
            "order: xdist hands tests to workers anew each run;"
            f" {len(found.tests)} test(s) slowed within what their compiling here explains,"
            f" their class and module holding, are not findings ({_first(found.tests)})"
        )
    return (
        f"tracing: {len(found.tests)} test(s) or module(s) traced longer or shorter where"
        " others did the opposite (a shared function traced first elsewhere): not findings"
        f" ({_first(found.tests)})"
    )


def _unattributed_note(steps: Sequence[Change]) -> str:
    """The steps that began between two runs of one commit, in one line: the suite's
    (the runner's speed) named with its size, the others counted and the first named."""
    suite = [c for c in steps if c.kind == "session"]
    others = [c for c in steps if c.kind != "session"]
    commits = sorted({(c.since.commit or "")[:12] for c in steps})
    said = []
    if suite:
        said.append(f"the runner's speed {suite[0].ratio:.2f}x since {suite[0].since.describe()}")
    if others:
        slower = sum(c.slower for c in others)
        said.append(
            f"{len(others)} test(s), class(es) or module(s) stepped ({slower} slower,"
            f" {len(others) - slower} faster: {_first([c.id for c in others])})"
        )
    return (
        f"environment: {'; '.join(said)}, between two runs of one commit"
        f" ({', '.join(commits)}): the code did not change there, so these are not changes;"
        " the runner or its environment moved"
    )


def busy_note(load: RunnerLoad) -> str:
    """``busy runner: ...``: what the tests' calls waited for a CPU (left out), what all
    the processes' threads waited (which no call's clock sees), and how the threshold
    was widened for it (``load.busy``, which a note is made for only where it is)."""
    calls, threads = load.calls_share, load.threads_share
    said = []
    if busy_share(calls, None):
        said.append(
            f"the tests' calls waited {load.cpu_wait or 0.0:.1f} s for a CPU"
            f" ({100 * (calls or 0.0):.0f}% of their time), left out of the timings judged"
        )
    if busy_share(None, threads):
        said.append(f"all their processes' threads waited {100 * (threads or 0.0):.0f}% of theirs")
    share = load.busy
    widened = busy_slack(share)
    return (
        f"busy runner: {'; '.join(said)}; the waits of the threads a test starts are not"
        f" seen, so the threshold is widened by 1/(1 - the share waited): {widened:.2f}x"
        f" at {100 * share:.0f}%"
    )


def _first(ids: Sequence[str], count: int = 3) -> str:
    return ", ".join(ids[:count]) + (" ..." if len(ids) > count else "")


Locate = Callable[[str, str], Location | None]  # (kind, id) -> where it is


def workflow_commands(
    comparison: Comparison, locate: Locate, limit: int = MAX_ANNOTATIONS
) -> list[str]:
    """``::warning`` workflow commands for the most severe alarms, at most ``limit``."""
    return [
        annotation(
            "warning",
            describe_alarm(alarm),
            culprit_location(alarm) or locate(alarm.scope, alarm.id),
            f"{ALARM_TITLES[alarm.kind]} ({'function' if alarm.culprit else alarm.scope})",
        )
        for alarm in comparison.alarm_list[:limit]
    ]


def culprit_location(alarm: Alarm) -> Location | None:
    """Where a recompiling function was called, where that is in the project (a path
    relative to the rootdir); None otherwise."""
    culprit = alarm.culprit
    if culprit is None or os.path.isabs(culprit.path):
        return None
    return Location(culprit.path, culprit.line)


def summary_section(
    comparison: Comparison, failing: bool, fail_option: str = "--perf-fail"
) -> Section:
    """The job-summary section: the summary line, then one table row per finding."""
    line = summary_line(comparison, failing, fail_option)
    head = ["### pytest-accel performance", "", escape_cell(line), ""]
    if comparison.timing.totals_comparable and comparison.timing.run_total:
        # Runs' totals beside a run's total (each baseline run's tests, this run's).
        labels = [label for label, _ in comparison.timing.suite_history] + ["this run"]
        totals = [total for _, total in comparison.timing.suite_history] + [
            comparison.timing.run_total
        ]
        title = f"Suite total per run, {comparison.key}"
        head += [*mermaid_line_chart(title, labels, totals, "seconds"), ""]
    head += [escape_cell(note) + "  " for note in scope_notes(comparison)]
    # The most severe first; a recompiling function's symptoms beneath it.
    rows = [row for alarm in comparison.alarm_list for row in _alarm_rows(alarm)]
    rows += [_change_row(c) for c in comparison.timing.changes if not c.slower]
    c = comparison.compilation
    if c is not None and c.grew:
        rows.append(
            f"| compile time | session | suite | {c.baseline or 0:.3f} | {c.seconds:.3f} |"
            f" {c.ratio or 0:.2f}x | median of {c.samples} runs of this layout |"
        )
    rows += [_row("improvement", f, _evidence(f)) for f in comparison.timing.improvements]
    rows += [
        _row("learning", f, f"{f.samples} of the {comparison.timing.min_samples} samples needed")
        for f in comparison.timing.learning
    ]
    rows += [
        f"| new, slow | test | {escape_cell(t)} | | {s:.3f} | | no baseline yet |"
        for t, s in comparison.timing.new_slow
    ]
    if not rows:
        return Section(head)
    time = comparison.timing.time  # what every seconds cell is: execution or wall time
    head += [
        f"| | kind | id | baseline ({time}, s) | current ({time}, s) | ratio | evidence |",
        "| --- | --- | --- | ---: | ---: | ---: | --- |",
    ]
    return Section(head, rows)


def _alarm_rows(alarm: Alarm) -> list[str]:
    """An alarm's rows: its own; a recompiling function's, the function, then its
    tests' and their symptoms' rows, each ``same cause: ...``."""
    culprit = alarm.culprit
    if culprit is None:
        code = alarm.changed
        if code is None:
            return [_alarm_row(alarm)]
        return [
            _alarm_row(alarm),
            f"| changed code it runs | {alarm.scope} | {escape_cell(', '.join(code.names))}"
            f" | | | | changed since {code.since[:12]} |",
        ]
    head = (
        f"| recompiled | function | {escape_cell(culprit.describe())} | | | |"
        f" compiled anew on every call in {alarm.recompiling_tests} test(s) |"
    )
    return [head, *(_alarm_row(part, "same cause: ") for part in (alarm, *alarm.symptoms))]


def _alarm_row(alarm: Alarm, prefix: str = "") -> str:
    found = alarm.finding
    if isinstance(found, Finding):
        return _row(f"{prefix}regression", found, _evidence(found))
    if isinstance(found, Change):
        return _change_row(found, prefix)
    if isinstance(found, MemoryGrowth):
        return (
            f"| {prefix}memory | test | {escape_cell(found.id)} | {size(found.baseline)} |"
            f" {size(found.current)} | {found.ratio:.2f}x | peak device memory, most of"
            f" {found.samples} baseline runs |"
        )
    if found.of_one_function:
        return (
            f"| {prefix}recompiled | test | {escape_cell(found.id)} | {found.baseline} |"
            f" {found.current} | | compilations of its most compiled function, most of"
            f" {found.samples} baseline runs |"
        )
    return (
        f"| {prefix}recompiled | test | {escape_cell(found.id)} | {found.baseline} |"
        f" {found.current} | | recompilations, most of {found.samples} baseline runs |"
    )


def _change_row(change: Change, prefix: str = "") -> str:
    return _row(
        f"{prefix}change",
        change,
        f"since {escape_cell(change.since.describe())}, {change.runs} runs",
    )


def _evidence(finding: Finding) -> str:
    text = f"{finding.samples} samples"
    if finding.compiling is not None:
        text += f"; execution time, {finding.compiling:.3f} s compiling beside it"
    return text


def _row(what: str, finding: Finding | Change, evidence: str) -> str:
    then, now = (
        (finding.baseline, finding.current)
        if isinstance(finding, Finding)
        else (finding.before, finding.after)
    )
    return (
        f"| {what} | {finding.kind} | {escape_cell(finding.id)} | {then:.3f} | {now:.3f} |"
        f" {finding.ratio:.2f}x | {evidence} |"
    )


def markdown(comparison: Comparison, failing: bool, fail_option: str = "--perf-fail") -> str:
    """The section alone, within the job summary's budget (``compare --format markdown``)."""
    return fit([summary_section(comparison, failing, fail_option)], MAX_SUMMARY_BYTES)


def compilation_line(compilation: RunCompilation) -> str:
    """``compilation: 41% of test time (312 compilations, 12.3 s; ...)``."""
    return f"compilation: {compilation_text(compilation)}"


def compilation_text(compilation: RunCompilation) -> str:
    """``41% of test time (312 compilations, 12.3 s; ...)``: what JAX's tracing and
    compiling took, and what the persistent compilation cache saved or could save."""
    count, seconds = compilation.count, compilation.seconds
    hits, misses = compilation.cache_hits, compilation.cache_misses
    backend, trace = compilation.backend_seconds, compilation.trace_seconds
    # The cache keeps the backend's compiled programs; tracing and lowering run anyway.
    saves = backend if backend is not None else seconds
    cache = (
        f"persistent cache: {hits} hit(s), {misses} miss(es)"
        if hits or misses
        else "the persistent compilation cache is off (jax_compilation_cache_dir):"
        f" up to {saves:.1f} s a run to save, the backend's compiling"
    )
    parts = f"{seconds:.1f} s"
    if trace is not None and backend is not None:
        parts += f": {trace:.1f} s tracing, {backend:.1f} s in the backend"
    return one_line(
        f"{100 * compilation.share:.0f}% of test time ({count} compilation(s), {parts}; {cache})"
    )


def compilation_section(compilation: RunCompilation) -> Section:
    return Section(
        ["### pytest-accel compilation", "", escape_cell(compilation_line(compilation)), ""]
    )


def dropped_line(dropped: list[tuple[str, str]], window: int) -> str:
    """The tests a baseline update left without a sample: they failed, were skipped or
    did not run in each of the window's runs, and compare as new until they pass."""
    tests = [test for _, test in dropped]
    keys = sorted({key for key, _ in dropped})
    shown = ", ".join(tests[:3]) + (" ..." if len(tests) > 3 else "")
    return one_line(
        f"perf: {len(tests)} test(s) have no sample left in the baseline's last {window}"
        f" run(s) of {', '.join(keys)} (--perf-window counts runs; a test keeps the samples of"
        f" those it passed in): they failed or did not pass in each, and compare as new"
        f" until they pass ({shown})"
    )
