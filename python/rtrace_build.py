"""The PEP 517 build backend of the rtrace wheel (pyproject.toml), needing nothing but cargo.

``build_wheel`` runs ``cargo build -p rtrace-collector -p rtrace-inject`` (``--release``
unless ``RTRACE_WHEEL_PROFILE=debug`` or ``--config-settings profile=debug``) and writes one
wheel holding:

- ``rtrace/``: the Python package (python/rtrace/);
- ``rtrace-V.data/scripts/rtrace`` and ``.../scripts/librtrace.so``: the command and the library,
  installed side by side into the environment's ``bin/``, where ``rtrace record`` finds
  librtrace.so next to its executable.

``RTRACE_WHEEL_ARTIFACTS=DIR`` (or ``--config-settings artifacts=DIR``) packages the ``rtrace``
and ``librtrace.so`` already in DIR (a cargo profile directory such as target/debug) without
running cargo. Cargo is ``$CARGO`` (set under ``cargo test``), else ``cargo`` on ``PATH``.
"""

import base64
import hashlib
import io
import json
import os
import re
import subprocess
import sysconfig
import tarfile
import zipfile

NAME = "rtrace"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SUMMARY = "A CUDA tracer for unmodified programs: rtrace command, librtrace.so, Python API"


def _version():
    with open(os.path.join(ROOT, "Cargo.toml"), encoding="utf-8") as f:
        text = f.read()
    section = text.split("[workspace.package]", 1)[1]
    return re.search(r'^version\s*=\s*"([^"]+)"', section, re.M).group(1)


def _metadata(version):
    return "\n".join(
        [
            "Metadata-Version: 2.1",
            f"Name: {NAME}",
            f"Version: {version}",
            f"Summary: {SUMMARY}",
            "License: MIT OR Apache-2.0",
            "Requires-Python: >=3.8",
            "Provides-Extra: pandas",
            "Requires-Dist: pandas; extra == 'pandas'",
            "Provides-Extra: polars",
            "Requires-Dist: polars; extra == 'polars'",
            "",
            "See docs/python.md in the rtrace repository.",
            "",
        ]
    )


def _tag():
    platform = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    return f"py3-none-{platform}"


def _setting(config_settings, key, env):
    value = (config_settings or {}).get(key)
    return value if value else os.environ.get(env)


def _cargo_build(profile):
    """Builds the command and the library; returns their paths (cargo's own report of them)."""
    argv = [os.environ.get("CARGO", "cargo"), "build", "-p", "rtrace-collector", "-p", "rtrace-inject"]
    if profile != "debug":
        argv.append("--release")
    argv.append("--message-format=json-render-diagnostics")
    done = subprocess.run(argv, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed (exit {done.returncode})")
    binary = library = None
    for line in done.stdout.splitlines():
        msg = json.loads(line)
        if msg.get("reason") != "compiler-artifact":
            continue
        if msg["target"]["name"] == "rtrace" and msg.get("executable"):
            binary = msg["executable"]
        for f in msg.get("filenames", []):
            if os.path.basename(f) == "librtrace.so":
                library = f
    if not binary or not library:
        raise RuntimeError("cargo built no rtrace command or no librtrace.so")
    return binary, library


def _artifacts(config_settings):
    prebuilt = _setting(config_settings, "artifacts", "RTRACE_WHEEL_ARTIFACTS")
    if prebuilt:
        found = [os.path.join(prebuilt, n) for n in ("rtrace", "librtrace.so")]
        for f in found:
            if not os.path.isfile(f):
                raise RuntimeError(f"{f}: missing (build it with cargo first)")
        return found
    profile = _setting(config_settings, "profile", "RTRACE_WHEEL_PROFILE") or "release"
    if profile not in ("release", "debug"):
        raise RuntimeError(f"profile {profile!r}: expected release or debug")
    return _cargo_build(profile)


def _digest(data):
    sha = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return f"sha256={sha.decode()}"


class _Wheel:
    def __init__(self, path):
        self.zip = zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED)
        self.record = []

    def write(self, arcname, data, executable=False):
        if isinstance(data, str):
            data = data.encode()
        info = zipfile.ZipInfo(arcname, date_time=(2020, 1, 1, 0, 0, 0))
        info.compress_type = zipfile.ZIP_DEFLATED
        info.external_attr = (0o100755 if executable else 0o100644) << 16
        self.zip.writestr(info, data)
        return data

    def add(self, arcname, data, executable=False):
        data = self.write(arcname, data, executable)
        self.record.append(f"{arcname},{_digest(data)},{len(data)}")

    def close(self, record_name):
        """Writes RECORD (which lists itself without a hash) and closes the file."""
        self.record.append(f"{record_name},,")
        self.write(record_name, "\n".join(self.record) + "\n")
        self.zip.close()


def _dist_info(version, tag):
    return {
        "METADATA": _metadata(version),
        "WHEEL": f"Wheel-Version: 1.0\nGenerator: rtrace_build\nRoot-Is-Purelib: false\nTag: {tag}\n",
    }


# ---- PEP 517 hooks


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    version = _version()
    name = f"{NAME}-{version}.dist-info"
    os.makedirs(os.path.join(metadata_directory, name), exist_ok=True)
    for file, text in _dist_info(version, _tag()).items():
        with open(os.path.join(metadata_directory, name, file), "w", encoding="utf-8") as f:
            f.write(text)
    return name


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    version, tag = _version(), _tag()
    binary, library = _artifacts(config_settings)
    filename = f"{NAME}-{version}-{tag}.whl"
    os.makedirs(wheel_directory, exist_ok=True)
    wheel = _Wheel(os.path.join(wheel_directory, filename))
    package = os.path.join(ROOT, "python", NAME)
    for file in sorted(os.listdir(package)):
        if file.endswith(".py"):
            with open(os.path.join(package, file), "rb") as f:
                wheel.add(f"{NAME}/{file}", f.read())
    scripts = f"{NAME}-{version}.data/scripts"
    for path in (binary, library):
        with open(path, "rb") as f:
            wheel.add(f"{scripts}/{os.path.basename(path)}", f.read(), executable=True)
    dist_info = f"{NAME}-{version}.dist-info"
    for file, text in _dist_info(version, tag).items():
        wheel.add(f"{dist_info}/{file}", text)
    wheel.close(f"{dist_info}/RECORD")
    return filename


def build_sdist(sdist_directory, config_settings=None):
    """The tracked files (``git ls-files``) as NAME-V.tar.gz."""
    version = _version()
    files = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, stdout=subprocess.PIPE, check=True
    ).stdout.decode().split("\0")
    base = f"{NAME}-{version}"
    filename = f"{base}.tar.gz"
    os.makedirs(sdist_directory, exist_ok=True)
    with tarfile.open(os.path.join(sdist_directory, filename), "w:gz") as tar:
        for f in files:
            if f and os.path.exists(os.path.join(ROOT, f)):
                tar.add(os.path.join(ROOT, f), arcname=f"{base}/{f}", recursive=False)
        info = tarfile.TarInfo(f"{base}/PKG-INFO")
        data = _metadata(version).encode()
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return filename
