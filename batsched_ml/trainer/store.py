"""The model store: one skops file per week and a manifest, written atomically.

``DIR/week-0042.skops`` holds the Random Forest of week 42 in skops format (never pickle), as
the flat arrays the scheduler executes (:func:`batsched_ml.predict.forest.compile_forest`: tree
offsets, children, features, thresholds, leaf probabilities), so loading it needs no type beyond
skops's defaults and takes a millisecond, where the scikit-learn object took 40 ms to write and
as much to read at every week boundary (the side trainer's whole overhead);
``DIR/manifest.json`` has one entry per week: the file, its sha256, the divider, the training-set
size and time, the quality of the previous week's model on the jobs of that week, and the feature
list. Files are written to a temporary name, flushed and renamed, so a reader sees a whole file or
none.

Loading is defensive: a file whose sha256 differs from its manifest entry, that skops cannot read
(truncated), that holds a type outside skops's defaults and :data:`TRUSTED_TYPES`, or whose arrays
are not a well-formed forest (:func:`~batsched_ml.predict.forest.check_compiled`: a tree walk that
could loop or leave its tree) is rejected with :class:`ModelRejected` and never executed.

A model file of the expected shape (a skops ``DictNode`` of ``NdArrayNode`` numpy arrays, each
an uncompressed ``.npy`` member) is read without skops (:func:`_plain_arrays`: ``numpy.load``
with pickles refused, the same arrays skops builds): importing skops imports scikit-learn and
SciPy, about 1.5 s that the scheduler's process need not spend. Any other file goes through
skops's audited loader, which rejects it as before.

It is written without skops too (:func:`model_file_bytes`), in the same format (skops's
protocol 2, which ``skops.io.loads`` reads: tested), for two reasons: the same arrays give the
same bytes (skops names each member after the array's memory address and stamps it with the
time, so the same model had another sha256 at each run), and the side trainer does not import
skops before answering its first request (skops imports pandas and pytest: 0.5-0.7 s that each
classified replay with a side trainer waited for).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from batsched_ml.predict.features import FEATURE_NAMES
from batsched_ml.predict.forest import FastForest, check_compiled

#: Types a weekly model may contain beyond those skops trusts by default: none, a model file is
#: a dict of numpy arrays.
TRUSTED_TYPES: list[str] = []


def close_history(path: str | Path) -> None:
    """Fold the write-ahead log of the trainer's SQLite history at ``path`` into the database,
    leaving ``path`` alone (no ``-wal`` or ``-shm`` beside it): what closing the history does
    (:meth:`~batsched_ml.trainer.server.History.close`), for a trainer process that was killed
    before it could (an interrupted run kills its trainer: it may be training). Committed jobs
    are kept; a transaction the kill cut short is dropped, as SQLite's recovery does. No
    database, or one that cannot be opened: nothing done."""
    import sqlite3

    path = Path(path)
    if not path.exists():
        return
    try:
        db = sqlite3.connect(str(path))
    except sqlite3.Error:
        return
    try:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    except sqlite3.Error:
        pass
    finally:
        db.close()  # the last connection: SQLite removes -wal and -shm


class ModelRejected(RuntimeError):
    """A model file that must not be used; the message says why."""


def _atomic_write(path: Path, data: bytes, *, durable: bool = False) -> None:
    """Write to a temporary name, then rename: readers see the old file or the new one, whole.
    ``durable`` also fsyncs (the manifest); a model file lost in a machine crash is simply
    retrained, and fsyncing 5 MB every week would cost more than the training's margin."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with tmp.open("wb") as out:
        out.write(data)
        if durable:
            out.flush()
            os.fsync(out.fileno())
    tmp.replace(path)


def _entry_text(entry: dict[str, Any]) -> str:
    """``entry`` as ``json.dumps(manifest, indent=1)`` writes it inside the manifest's
    ``entries`` list (two levels deep: each line indented by two more spaces)."""
    return "\n".join("  " + line for line in json.dumps(entry, indent=1).split("\n"))


class ModelStore:
    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.manifest_path = self.root / "manifest.json"
        # what this store has written: each entry's text, indented as the manifest holds it,
        # by week (None until the first write, which reads the file once)
        self._texts: dict[int, str] | None = None

    def manifest(self) -> dict[str, Any]:
        if not self.manifest_path.exists():
            return {"schema": 1, "entries": []}
        return json.loads(self.manifest_path.read_text())

    def entry(self, week: int) -> dict[str, Any] | None:
        for entry in self.manifest()["entries"]:
            if entry["week"] == week:
                return entry
        return None

    def serialise(
        self, week: int, arrays: dict[str, np.ndarray], meta: dict[str, Any]
    ) -> tuple[dict[str, Any], bytes]:
        """The skops bytes of a compiled forest and its manifest entry, without writing
        anything."""
        data = model_file_bytes(arrays)
        entry = {
            "week": week,
            "file": f"week-{week:04d}.skops",
            "sha256": hashlib.sha256(data).hexdigest(),
            "features": list(FEATURE_NAMES),
            **meta,
        }
        return entry, data

    def write(self, entry: dict[str, Any], data: bytes) -> None:
        """Write a serialised model, then record its manifest entry."""
        _atomic_write(self.root / entry["file"], data)
        self.record(entry)

    def record(self, entry: dict[str, Any]) -> None:
        """Add or replace a manifest entry (also for weeks without a forest).

        The file is ``json.dumps({"schema": 1, "entries": [...]}, indent=1)``, entries by week,
        written whole (atomically, fsynced) every week. Each entry is encoded once, when it is
        recorded, and kept: the file is then joined from the kept texts. Decoding the file
        and encoding every entry again each week (indented JSON is Python's slow encoder)
        grew with the square of the weeks: 3.5 s of the side trainer's time on full HPC2N."""
        if self._texts is None:
            self._texts = {e["week"]: _entry_text(e) for e in self.manifest()["entries"]}
        self._texts[entry["week"]] = _entry_text(entry)
        body = ",\n".join(self._texts[week] for week in sorted(self._texts))  # never empty
        text = '{\n "schema": 1,\n "entries": [\n' + body + "\n ]\n}\n"
        _atomic_write(self.manifest_path, text.encode(), durable=True)

    def load(self, entry: dict[str, Any], data: bytes | None = None) -> FastForest:
        """The forest of a manifest entry, after every check. ``data``: the file's bytes when
        the trainer sent them along (they get the same checks as bytes read from disk)."""
        path = self.root / entry["file"]
        if data is None:
            try:
                data = path.read_bytes()
            except OSError as exc:
                raise ModelRejected(f"{path}: cannot read: {exc.strerror or exc}") from None
        digest = hashlib.sha256(data).hexdigest()
        if digest != entry.get("sha256"):
            raise ModelRejected(f"{path}: sha256 {digest[:12]}... differs from the manifest's")
        model = _plain_arrays(data)
        if model is None:
            # one pass: skops audits every type against the allowlist before building
            # anything, and refuses the file if it finds another
            import skops.io as sio
            from skops.io.exceptions import UntrustedTypesFoundException

            try:
                model = sio.loads(data, trusted=TRUSTED_TYPES)
            except UntrustedTypesFoundException as exc:
                raise ModelRejected(f"{path}: contains untrusted types: {exc}") from None
            except Exception as exc:
                raise ModelRejected(f"{path}: not a readable skops file: {exc}") from None
        try:
            check_compiled(model)
        except ValueError as exc:
            raise ModelRejected(f"{path}: not a well-formed forest: {exc}") from None
        if int(model["n_features"]) != len(FEATURE_NAMES):
            raise ModelRejected(f"{path}: expects {int(model['n_features'])} features")
        return FastForest(model)


#: The date of every member of a model file: a fixed one, so that the same arrays give the same
#: bytes (zip's earliest date; skops writes the current time).
_MEMBER_DATE = (1980, 1, 1, 0, 0, 0)
#: The skops release whose format (protocol 2) :func:`model_file_bytes` writes.
_SKOPS_FORMAT = {"protocol": 2, "_skops_version": "0.16.0"}


#: The schema fields of a skops dict and of a skops numpy array, as ``skops.io.dumps`` writes
#: them for a compiled forest.
_DICT_NODE = {"__class__": "dict", "__module__": "builtins", "__loader__": "DictNode"}
_DICT_EXTRA = ("content", "key_types", "__id__", "protocol", "_skops_version")
_STR_TYPE = {"__class__": "str", "__module__": "builtins", "__loader__": "TypeNode"}
_ARRAY_NODE = {
    "__class__": "ndarray",
    "__module__": "numpy",
    "__loader__": "NdArrayNode",
    "type": "numpy",
}


def model_file_bytes(arrays: dict[str, np.ndarray]) -> bytes:
    """A skops file (protocol 2, uncompressed) of a dict of numpy arrays, as
    ``skops.io.dumps(arrays, compression=0)`` writes it except that it is deterministic: the
    members are numbered ``1.npy``, ``2.npy``, ... in the dict's order (skops uses memory
    addresses), each dated :data:`_MEMBER_DATE`, and the schema's ids are those numbers."""
    buffer = io.BytesIO()
    content: dict[str, dict[str, Any]] = {}
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_STORED) as archive:

        def add(name: str, data: bytes) -> None:
            member = zipfile.ZipInfo(name, date_time=_MEMBER_DATE)
            member.external_attr = 0o600 << 16  # rw------- as skops's
            archive.writestr(member, data)

        for number, (key, value) in enumerate(arrays.items(), start=1):
            npy = io.BytesIO()
            np.save(npy, np.asarray(value), allow_pickle=False)
            add(f"{number}.npy", npy.getvalue())
            content[key] = {**_ARRAY_NODE, "file": f"{number}.npy", "__id__": number}
        count = len(content)
        str_type = {**_STR_TYPE, "__id__": count + 1}  # one type node, as skops shares it
        key_types = {"__class__": "list", "__module__": "builtins", "__loader__": "ListNode"}
        schema = {
            **_DICT_NODE,
            "content": content,
            "key_types": {**key_types, "content": [str_type] * count, "__id__": count + 2},
            "__id__": count + 3,
            **_SKOPS_FORMAT,
        }
        add("schema.json", json.dumps(schema, indent=2).encode())
    return buffer.getvalue()


#: The header ``numpy.save`` writes for a C-ordered array of a plain number or boolean type
#: (format 1.0): what :func:`_npy_array` reads without ``numpy.load``
_NPY_HEADER = re.compile(
    rb"\{'descr': '(<[fiu][248]|\|[bui]1)', 'fortran_order': False, "
    rb"'shape': \(((?:[0-9]+, )*[0-9]*|[0-9]+,)\), \} *\n"
)


def _npy_array(data: bytes) -> np.ndarray:
    """``numpy.load(io.BytesIO(data), allow_pickle=False)``, read directly when the header is
    :data:`_NPY_HEADER` and the data holds the array exactly: ``numpy.load`` evaluates each
    header as a Python literal, which was a third of loading a week's model (nine arrays, 180
    weeks a full HPC2N replay, each waited for). Anything else is ``numpy.load``'s to read or
    refuse."""
    if data[:8] == b"\x93NUMPY\x01\x00" and len(data) >= 10:
        end = 10 + int.from_bytes(data[8:10], "little")
        match = _NPY_HEADER.fullmatch(data, 10, end)
        if match is not None:
            dtype = np.dtype(match.group(1).decode("ascii"))
            shape = tuple(int(n) for n in match.group(2).split(b",") if n.strip())
            count = int(np.prod(shape, dtype=np.int64))
            if len(data) - end == count * dtype.itemsize:
                return np.frombuffer(data, dtype, count, end).reshape(shape).copy()
    return np.load(io.BytesIO(data), allow_pickle=False)


def _plain_arrays(data: bytes) -> dict[str, np.ndarray] | None:
    """The arrays of a skops file that holds exactly a dict of numpy arrays, read with
    ``numpy.load(allow_pickle=False)`` as skops reads them; ``None`` for any other content
    (then skops itself decides), never an exception."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            schema = json.loads(archive.read("schema.json"))
            if not isinstance(schema, dict) or set(schema) - {*_DICT_NODE, *_DICT_EXTRA}:
                return None
            if any(schema.get(k) != v for k, v in _DICT_NODE.items()):
                return None
            key_types = schema.get("key_types", {"content": []})
            if not isinstance(key_types, dict) or not isinstance(key_types.get("content"), list):
                return None
            if any(
                not isinstance(t, dict) or any(t.get(k) != v for k, v in _STR_TYPE.items())
                for t in key_types["content"]
            ):
                return None
            content = schema.get("content")
            if not isinstance(content, dict):
                return None
            arrays: dict[str, np.ndarray] = {}
            for key, node in content.items():
                if not isinstance(node, dict) or set(node) != {*_ARRAY_NODE, "file", "__id__"}:
                    return None
                if any(node[k] != v for k, v in _ARRAY_NODE.items()):
                    return None
                with archive.open(node["file"]) as member:
                    value = _npy_array(member.read())
                if not isinstance(value, np.ndarray):
                    return None
                arrays[key] = value
            return arrays
    except Exception:  # whatever it is, skops's own loader judges it
        return None
