"""Which runs a folder of captures holds (docs/import.md): the run-per-folder layout or a
manifest, checked before anything is analysed or stored.

Layout: `FOLDER/RUN/mn.pcap` and/or `FOLDER/RUN/cn.pcap` (`.pcapng` too), optionally
`RUN/radio.*` (a radio log, `cellperf.radiologs`) and `RUN/gps.*` (a position track); one
folder per run, runs in name order. A FOLDER holding `mn.*`/`cn.*` itself is one run.

Manifest (CSV, any other layout): one row per run, paths relative to the manifest's folder:

    run,mn,cn,radio,gps,network,scenario,test_type,mn_addr,synced_clocks,control_port,codec
    drive-1,phone/0412.pcapng,server/0412.pcap,logs/0412.csv,logs/0412.nmea,,mobile,,,,

`run` and one of `mn`/`cn` are required; an empty cell takes the command line's value.

Identity (**choice**): a run is the SHA-256 of its files' contents (each file's own SHA-256,
by role) and of the options that change its analysis, computed by whoever analyses the run
(a Dask worker reads the files once for both); a run whose content is stored already is not
stored again. Before that, a quick check spares re-reading files imported before: a run
whose files have the path, size and modification time (ns) they had when it was stored, with
the same options, is skipped unread (as make, rsync and git decide a file is unchanged).
"""

from __future__ import annotations

import csv
import hashlib
import json
import mmap
import os
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from cellperf.campaign.analyse import AUTO_TEST_TYPE, TEST_PROTOCOL, voip_codecs
from cellperf.campaign.spec.values import identifier, scenario_label
from cellperf.errors import UserError, os_reason
from cellperf.validate import number

CAPTURE_SUFFIXES = (".pcap", ".pcapng", ".cap")
MANIFEST_COLUMNS = ("run", "mn", "cn", "radio", "gps", "network", "scenario", "test_type", "mn_addr",
                    "synced_clocks", "control_port", "codec")
ROLES = ("mn", "cn", "radio", "gps")


@dataclass(frozen=True)
class CaptureRun:
    """One run's files and the options of its analysis."""

    name: str  # the run's folder name or the manifest's `run`
    mn: Path | None
    cn: Path | None
    radio: Path | None = None
    radio_format: str | None = None
    gps: Path | None = None
    gps_format: str | None = None
    network: str = "imported"
    scenario: str = "stationary"
    test_type: str = AUTO_TEST_TYPE
    mn_addr: str | None = None
    synced_clocks: bool = False
    control_port: int | None = None  # an agents' control connection, not the test's data
    codec: str | None = None  # a VoIP run's codec (None: told from its packets)

    def files(self) -> dict[str, Path]:
        return {role: getattr(self, role) for role in ROLES if getattr(self, role) is not None}

    def options(self, interval_s: float, tz: str) -> dict:
        """What changes the analysis besides the files."""
        return {"network": self.network, "scenario": self.scenario, "test_type": self.test_type,
                "mn_addr": self.mn_addr, "synced_clocks": self.synced_clocks, "control_port": self.control_port,
                "interval_s": interval_s,
                "radio_format": self.radio_format, "gps_format": self.gps_format, "tz": tz,
                # Only when given, so that runs imported before the option keep their identity.
                **({"codec": self.codec} if self.codec else {})}


def _one(folder: Path, stem: str) -> Path | None:
    """The file `stem.*` in `folder` (captures: a capture suffix), None if absent; two are an error."""
    found = sorted(p for p in folder.glob(f"{stem}.*") if p.is_file())
    if stem in ("mn", "cn"):
        found = [p for p in found if p.suffix.lower() in CAPTURE_SUFFIXES]
    if len(found) > 1:
        raise UserError(f"{folder}: {len(found)} files for {stem} ({', '.join(p.name for p in found)}); keep one")
    return found[0] if found else None


def _from_folder(folder: Path, defaults: CaptureRun) -> CaptureRun | None:
    mn, cn = _one(folder, "mn"), _one(folder, "cn")
    if mn is None and cn is None:
        return None
    return replace(defaults, name=folder.name, mn=mn, cn=cn, radio=_one(folder, "radio"), gps=_one(folder, "gps"))


def _from_manifest(path: Path, defaults: CaptureRun) -> list[CaptureRun]:
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(f"{path}: cannot read the manifest ({os_reason(e) if isinstance(e, OSError) else e})") from None
    rows = list(csv.DictReader(text.splitlines()))
    if not rows:
        raise UserError(f"{path}: the manifest has no runs (header: {','.join(MANIFEST_COLUMNS)})")
    unknown = sorted(set(rows[0]) - set(MANIFEST_COLUMNS))
    if unknown or "run" not in rows[0]:
        raise UserError(f"{path}: unknown column(s) {', '.join(unknown) or '(none)'}; "
                        f"columns are {', '.join(MANIFEST_COLUMNS)} (run required)")
    runs, seen = [], set()
    for line, row in enumerate(rows, start=2):
        where = f"{path}:{line}"
        cell = {k: (v or "").strip() for k, v in row.items() if k is not None}
        if not cell.get("run"):
            raise UserError(f"{where}: run: empty (every row names its run)")
        if cell["run"] in seen:
            raise UserError(f"{where}: run: '{cell['run']}' appears twice")
        seen.add(cell["run"])
        files = {}
        for role in ROLES:
            if cell.get(role):
                p = (path.parent / cell[role])
                if not p.is_file():
                    raise UserError(f"{where}: {role}: {p}: no such file")
                files[role] = p
        if "mn" not in files and "cn" not in files:
            raise UserError(f"{where}: give mn or cn (a capture)")
        synced = cell.get("synced_clocks", "").lower()
        if synced not in ("", "true", "false", "1", "0", "yes", "no"):
            raise UserError(f"{where}: synced_clocks: use true or false, not '{cell['synced_clocks']}'")
        try:
            port = int(number(cell["control_port"], lo=1, hi=65535, integer=True)) if cell.get("control_port") \
                else defaults.control_port
        except ValueError as e:
            raise UserError(f"{where}: control_port: {e}") from None
        runs.append(replace(
            defaults, name=cell["run"], mn=files.get("mn"), cn=files.get("cn"), radio=files.get("radio"),
            gps=files.get("gps"), network=cell.get("network") or defaults.network,
            scenario=cell.get("scenario") or defaults.scenario, test_type=cell.get("test_type") or defaults.test_type,
            mn_addr=cell.get("mn_addr") or defaults.mn_addr,
            synced_clocks=synced in ("true", "1", "yes") if synced else defaults.synced_clocks, control_port=port,
            codec=cell.get("codec") or defaults.codec))
        _check_options(runs[-1], where)
    return runs


def _check_options(run: CaptureRun, where: str | None = None) -> None:
    """The run's options; errors name the manifest line (`where`) or the command-line option."""
    def name(option: str) -> str:
        return f"{where}: {option}" if where else f"--{option.replace('_', '-')}"

    try:
        identifier(run.network, "network")
    except ValueError as e:
        raise UserError(f"{name('network')}: '{run.network}' {e}") from None
    try:
        scenario_label(run.scenario)
    except ValueError as e:
        raise UserError(f"{name('scenario')}: {e}") from None
    if run.test_type != AUTO_TEST_TYPE and run.test_type not in TEST_PROTOCOL:
        raise UserError(f"{name('test_type')}: '{run.test_type}' unknown "
                        f"(choose from {AUTO_TEST_TYPE}, {', '.join(sorted(TEST_PROTOCOL))})")
    if run.codec is not None:
        if run.codec not in voip_codecs():
            raise UserError(f"{name('codec')}: '{run.codec}' unknown (choose from {', '.join(voip_codecs())})")
        if run.test_type != "voip":
            raise UserError(f"{name('codec')}: a codec is for test type voip, not {run.test_type}")


def find_runs(source: Path, defaults: CaptureRun) -> list[CaptureRun]:
    """The runs under `source` (a folder in the layout above, or a manifest .csv), with their
    log formats recognised; UserError naming the file when a run cannot be imported."""
    from cellperf.radiologs import sniff_positions, sniff_radio

    if source.is_file():
        runs = _from_manifest(source, defaults)
    else:
        _check_options(defaults)
        single = _from_folder(source, defaults)
        runs = [single] if single else [r for d in sorted(p for p in source.iterdir() if p.is_dir())
                                        if (r := _from_folder(d, defaults)) is not None]
        if not runs:
            raise UserError(f"{source}: no captures (expected RUN/mn.pcap and/or RUN/cn.pcap, .pcapng too, "
                            "one folder per run; or a manifest .csv)")
    out = []
    for run in runs:
        for role in ("mn", "cn"):
            path = getattr(run, role)
            if path is not None and path.stat().st_size == 0:
                raise UserError(f"{path}: empty capture")
        out.append(replace(run, radio_format=sniff_radio(run.radio) if run.radio else None,
                           gps_format=sniff_positions(run.gps) if run.gps else None))
    return out


def file_sha256(path: Path) -> str:
    """The file's SHA-256, hashed from a mapping of it: half the CPU of reading it in chunks
    (no copy out of the page cache), which was a fifth of a corpus run's import."""
    try:
        with open(path, "rb") as f:
            if os.fstat(f.fileno()).st_size == 0:
                return hashlib.sha256().hexdigest()
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
                return hashlib.sha256(m).hexdigest()
    except OSError as e:
        raise UserError(f"{path}: cannot read ({os_reason(e)})") from None


def quick_key(run: CaptureRun, interval_s: float, tz: str) -> str:
    """The run's files as they stand (path, size, mtime in ns) and its options, hashed."""
    stat = {}
    for role, p in run.files().items():
        try:
            st = p.stat()
        except OSError as e:
            raise UserError(f"{p}: cannot read ({os_reason(e)})") from None
        stat[role] = [str(p.resolve()), st.st_size, st.st_mtime_ns]
    return _digest({"stat": stat, "options": run.options(interval_s, tz)})


def content_identity(run: CaptureRun, interval_s: float, tz: str) -> tuple[str, dict[str, str]]:
    """(identity, {role: file SHA-256}): what the run is, by content and options."""
    files = {role: file_sha256(p) for role, p in run.files().items()}
    return _digest({"files": files, "options": run.options(interval_s, tz)}), files


def _digest(value: dict) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


def describe(run: CaptureRun) -> dict:
    """The run's files and options as JSON-able values (for `runs.config`)."""
    return {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(run).items()}
