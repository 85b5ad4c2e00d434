"""``rivven key``: encryption keys at rest — what each data key covers, rotating a topic's data
key, rewrapping every data key under another master key, re-encrypting a topic."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from .common import DryRunOpt, JsonOpt, open_engine
from .render import done, human_bytes, info, print_json, print_table, utc

app = typer.Typer(no_args_is_help=True)


def _ranges(cover: dict[str, Any], limit: int = 4) -> str:
    """``p0 0..999 local, p1 0..499 cold`` (the first ``limit`` runs, then how many more)."""
    runs = [f"p{r['partition']} {r['base_offset']}..{r['next_offset'] - 1} {r['tier']}"
            if r["next_offset"] > r["base_offset"] else f"p{r['partition']} (empty) {r['tier']}"
            for r in cover["ranges"]]
    more = len(runs) - limit
    return ", ".join(runs[:limit]) + (f", +{more} more" if more > 0 else "") if runs else "-"


@app.command()
def status(
    topic: Annotated[str | None, typer.Argument(
        help="Only this topic (default: every topic that encrypts, or ever did).")] = None,
    json: JsonOpt = False,
) -> None:
    """Per topic: cipher and master key, each data key version and the segment ranges and
    bytes it covers (local and cold), and the plaintext ones. Needs no keyring."""
    with open_engine(read_only=True) as eng:
        rows = eng.keys.status(topic)
    if json:
        print_json(rows)
        return
    table = []
    for t in rows:
        for k in t["keys"]:
            state = "current" if k["current"] else "missing" if k.get("missing") else "old"
            table.append((t["topic"], f"v{k['version']}", state, k["cipher"] or "-",
                          k["master_key_id"] or "-", utc(k["created_ms"], "seconds") or "-",
                          k["segments"], human_bytes(k["bytes"]), _ranges(k)))
        p = t["plaintext"]
        if p["segments"] or not t["keys"]:
            table.append((t["topic"], "plaintext", "-", "-", "-", "-", p["segments"],
                          human_bytes(p["bytes"]), _ranges(p)))
    print_table(["TOPIC", "KEY", "STATE", "CIPHER", "MASTER-KEY", "CREATED", "SEGMENTS", "BYTES",
                 "RANGES"], table, right=("SEGMENTS", "BYTES"), wrap=("RANGES",),
                drop=("CREATED", "CIPHER", "SEGMENTS"))
    for t in rows:
        if not t["encryption"] and t["keys"]:
            info(f"{t['topic']}: encryption.enable is false: new batches are plaintext")


@app.command()
def rotate(
    topic: Annotated[str, typer.Argument(help="Topic to give a new data key.")],
    json: JsonOpt = False,
) -> None:
    """Make a new data key for TOPIC: new batches are sealed with it (in every process, once
    it next takes the partition's lock); older batches stay readable with theirs. 'rivven key
    reencrypt' then moves them to it."""
    with open_engine() as eng:
        out = eng.keys.rotate(topic)
    if json:
        print_json(out)
        return
    done(f"{topic}: data key v{out['version']} ({out['cipher']}, under master key "
         f"{out['master_key_id']}) is current"
         + (f"; v{out['previous_version']} still opens older batches"
            if out["previous_version"] else ""))


@app.command()
def rewrap(
    to: Annotated[str, typer.Option("--to", help="Master key id (in the keyring) to wrap every "
                                    "data key under.")],
    topic: Annotated[list[str] | None, typer.Option(
        "--topic", "-t", help="Only this topic's data keys (repeatable; default: every "
        "topic's).")] = None,
    json: JsonOpt = False,
) -> None:
    """Wrap every data key anew under master key --to, which becomes each topic's
    encryption.key.id: seconds, no batch rewritten. The keyring must hold --to and the master
    keys in use now; those may leave it afterwards."""
    with open_engine() as eng:
        out = eng.keys.rewrap(to, topic)
    if json:
        print_json(out)
        return
    print_table(["TOPIC", "VERSIONS", "FROM", "TO"],
                [(t["topic"], t["versions"], ", ".join(t["previous_master_key_ids"]), to)
                 for t in out["topics"]], right=("VERSIONS",))
    done(f"rewrapped the data keys of {len(out['topics'])} topic(s) under master key {to}")


def render_reencrypt(out: dict[str, Any], json: bool) -> None:
    """The result of a reencrypt pass (in process or on Spark) as a table or JSON."""
    if json:
        print_json(out)
        return
    dry = out["dry_run"]
    target = f"v{out['target_version']}" if out["target_version"] else "plaintext"
    print_table(["PARTITION", "ROLLED", "LOCAL-SEGS", "COLD-SEGS", "BYTES", "REWRITTEN",
                 "COPIED"],
                [(p["partition"], "yes" if p["rolled"] else "no", len(p["local_segments"]),
                  len(p["cold_segments"]), human_bytes(p["bytes"]),
                  "-" if dry else p["batches_rewritten"], "-" if dry else p["batches_copied"])
                 for p in out["partitions"]],
                right=("PARTITION", "LOCAL-SEGS", "COLD-SEGS", "BYTES", "REWRITTEN", "COPIED"),
                drop=("ROLLED", "COPIED"))
    segs = sum(len(p["local_segments"]) + len(p["cold_segments"]) for p in out["partitions"])
    if dry:
        drop = ", ".join(f"v{v}" for v in out["would_drop"]) or "none"
        info(f"would rewrite {segs} segment(s) of {out['topic']} under {target}; would then "
             f"drop the data keys no batch uses: {drop}")
        return
    dropped = ", ".join(f"v{v}" for v in out["dropped_versions"]) or "none"
    kept = ", ".join(f"v{v}" for v in out["kept_versions"]) or "none"
    done(f"rewrote {segs} segment(s) of {out['topic']} under {target}; dropped data keys: "
         f"{dropped}; kept: {kept}")


@app.command()
def reencrypt(
    topic: Annotated[str, typer.Argument(help="Topic to re-encrypt.")],
    dry_run: DryRunOpt = False,
    json: JsonOpt = False,
) -> None:
    """Rewrite TOPIC's segments (local and cold) that hold batches under an older data key, or
    plaintext, under its current data key (with encryption.enable=false: back to plaintext),
    then drop the data keys no batch uses. Crash-safe like compaction's swap; in this process
    ('rivven spark reencrypt' runs the rewrites on Spark)."""
    with open_engine(read_only=dry_run) as eng:
        out = eng.keys.reencrypt(topic, dry_run=dry_run)
    render_reencrypt(out, json)
