"""The scale-out feature's options (``--accel-pin``, ``--accel-shard``,
``--accel-shard-by``) and the switch that registers its hooks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from pytest_accel.settings import (
    OptionGroup,
    OptionSpec,
    parse_choice,
    spec_in,
    text_setting,
    usage_error,
)

if TYPE_CHECKING:
    import pytest

PIN_MODES = ("auto", "off")
SHARD_BY = ("test", "class", "module")

OPTIONS = OptionGroup(
    "accel-scaleout",
    "Scaling out",
    "xdist workers and CI shards (pytest-accel)",
    (
        OptionSpec(
            "--accel-pin",
            "With pytest-xdist on a GPU or TPU runner: auto (default) gives each worker its"
            " own devices and makes -n auto the device count; off.",
            metavar="MODE",
            default="auto",
        ),
        OptionSpec(
            "--accel-shard",
            "Run shard K of N (1-based), balanced by the durations in --perf-baseline.",
            metavar="K/N",
        ),
        OptionSpec(
            "--accel-shard-by",
            "What a shard takes whole: test, class (default; class fixtures run once) or module.",
            metavar="UNIT",
            default="class",
        ),
    ),
)


def option(flag: str) -> OptionSpec:
    return spec_in(OPTIONS.specs, flag)


@dataclass(frozen=True)
class ScaleoutOptions:
    pin: str = "auto"
    shard: tuple[int, int] | None = None
    shard_by: str = "class"

    @property
    def shard_label(self) -> str | None:
        return f"{self.shard[0]}/{self.shard[1]}" if self.shard else None


def resolve(config: pytest.Config) -> ScaleoutOptions:
    """The options, validated: three settings, so each hook that needs them reads them."""
    pin = parse_choice(
        "--accel-pin", text_setting(config, option("--accel-pin")), PIN_MODES, "auto"
    )
    shard_text = text_setting(config, option("--accel-shard"))
    shard = None
    if shard_text:
        from pytest_accel.scaleout.sharding import ShardSpecError, parse_shard

        try:
            shard = parse_shard(shard_text)
        except ShardSpecError as exc:
            raise usage_error(f"--accel-shard: {exc}") from None
    shard_by = parse_choice(
        "--accel-shard-by", text_setting(config, option("--accel-shard-by")), SHARD_BY, "class"
    )
    return ScaleoutOptions(pin, shard, shard_by)
