"""`switchyard cache ls|verify|prune|stats` on a real host directory and a real redis-server.
The entries are written here, independently of the C++ code, in the documented layouts
(src/compile/entry_files.h, src/compile/redis_entry.h): a host entry is
<root>/<2 hex>/<key>/{artefact.so,cache_key_factors.json,metadata.json}, a Redis value is
`SYCCENT1`, three lengths, metadata, factors, artefact and an HMAC-SHA256 under the signing
key. So these tests also pin the formats."""
import hashlib
import hmac
import json
import os
import socket
import struct
import time

import pytest

from peer_servers import free_port
from redis_server import RedisServer

SIGNING_KEY = b"e2e-signing-key-0123456789"
PREFIX = "switchyard:compile:"


def canonical(value) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def project_version(switchyard) -> str:
    return switchyard("--version").stdout.decode().split()[-1]


def make_entry(version, bucket, size, isa=("portable",)):
    """(key, metadata.json, cache_key_factors.json, artefact) of one entry."""
    factors = {"graph_digest": "e2e", "bucket": {"tokens": bucket}, "project_version": version}
    key = hashlib.sha256(canonical(factors).encode()).hexdigest()
    artefact = bytes((k * 31 + bucket) & 0xFF for k in range(size))
    metadata = ('{"format_version":1,"key":"%s","project_version":"%s","artefact_sha256":"%s",'
                '"artefact_bytes":%d,"isa_features":[%s],"created_unix_s":%d}\n' % (
                    key, version, hashlib.sha256(artefact).hexdigest(), len(artefact),
                    ",".join('"%s"' % f for f in isa), int(time.time())))
    factors_file = canonical({"key": key, "factors": factors, "non_semantic": {}}) + "\n"
    return key, metadata, factors_file, artefact


def write_host_entry(root, entry, age_s):
    key, metadata, factors_file, artefact = entry
    directory = root / key[:2] / key
    directory.mkdir(parents=True)
    (directory / "artefact.so").write_bytes(artefact)
    (directory / "cache_key_factors.json").write_text(factors_file)
    (directory / "metadata.json").write_text(metadata)
    used = time.time() - age_s
    os.utime(directory / "metadata.json", (used, used))
    return directory


def redis_value(entry, signing_key=SIGNING_KEY, signed=True):
    _, metadata, factors_file, artefact = entry
    body = (b"SYCCENT1" + struct.pack("<IIQ", len(metadata), len(factors_file), len(artefact)) +
            metadata.encode() + factors_file.encode() + artefact)
    return body + (hmac.new(signing_key, body, hashlib.sha256).digest() if signed else b"")


def redis_command(port, *args):
    """Sends one command in RESP and returns the first line of the reply."""
    parts = [b"*%d\r\n" % len(args)]
    for arg in args:
        arg = arg if isinstance(arg, bytes) else str(arg).encode()
        parts.append(b"$%d\r\n%s\r\n" % (len(arg), arg))
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"".join(parts))
        return s.makefile("rb").readline()


def lines(proc, level):
    return [line.split() for line in proc.stdout.decode().splitlines() if line.startswith(level)]


@pytest.fixture
def host_dir(tmp_path, switchyard):
    """Three good entries (oldest first) and one with a flipped artefact byte."""
    version = project_version(switchyard)
    root = tmp_path / "compile"
    entries = [make_entry(version, bucket, 2000) for bucket in (1, 2, 3, 4)]
    for age, entry in zip((400, 300, 200, 100), entries):
        write_host_entry(root, entry, age)
    bad = root / entries[3][0][:2] / entries[3][0] / "artefact.so"
    data = bytearray(bad.read_bytes())
    data[10] ^= 1
    bad.write_bytes(bytes(data))
    # Never read as entries.
    (root / entries[0][0][:2] / (".tmp-" + entries[0][0] + "-1-0")).mkdir()
    (root / "notes.txt").write_text("not an entry")
    return root, [entry[0] for entry in entries]


def test_host_directory(switchyard, host_dir):
    root, keys = host_dir
    listed = lines(switchyard("cache", "ls", "--dir", root), "host")
    assert [row[1] for row in listed] == keys[::-1]  # most recently used first
    assert all("graph_digest=e2e" in row for row in listed)
    assert any("bucket={1}" in row for row in listed)

    stats = switchyard("cache", "stats", "--dir", root).stdout.decode()
    assert f"host  {root}: 4 entries," in stats

    proc = switchyard("cache", "verify", "--dir", root, check=False)
    assert proc.returncode == 1
    verdicts = {row[1]: row[2] for row in lines(proc, "host")}
    assert verdicts == {keys[0]: "ok", keys[1]: "ok", keys[2]: "ok", keys[3]: "bad:"}
    assert "SHA-256" in proc.stdout.decode()
    assert "1 bad compile cache entries" in proc.stderr.decode()
    proc = switchyard("cache", "verify", "--dir", root, "--remove-bad")
    assert "bad (removed)" in proc.stdout.decode()
    assert not (root / keys[3][:2] / keys[3]).exists()
    assert "3 ok, 0 bad" in switchyard("cache", "verify", "--dir", root).stdout.decode()

    # Room for two entries: the least recently used goes.
    one_entry = sum(f.stat().st_size for f in (root / keys[0][:2] / keys[0]).iterdir())
    proc = switchyard("cache", "prune", "--dir", root, "--max-bytes", 2 * one_entry)
    assert "removed 1 entries" in proc.stdout.decode()
    assert [row[1] for row in lines(switchyard("cache", "ls", "--dir", root), "host")] == \
        [keys[2], keys[1]]
    switchyard("cache", "prune", "--dir", root, "--all")
    assert lines(switchyard("cache", "ls", "--dir", root), "host") == []
    assert "0 entries" in switchyard("cache", "stats", "--dir", root).stdout.decode()


def test_usage_and_missing_directory(switchyard, tmp_path):
    (tmp_path / "compile").mkdir()
    proc = switchyard("cache", "prune", "--dir", tmp_path / "compile", check=False)
    assert proc.returncode == 2
    assert "exactly one of --max-bytes and --all" in proc.stderr.decode()
    proc = switchyard("cache", "ls", "--dir", tmp_path / "nowhere", check=False)
    assert proc.returncode == 1
    assert "no compile cache directory" in proc.stderr.decode()
    proc = switchyard("cache", "ls", "--dir", tmp_path / "compile", "--redis", "127.0.0.1:6379",
                      check=False)
    assert proc.returncode == 2
    assert "signing key" in proc.stderr.decode()
    key_file = tmp_path / "key"
    key_file.write_bytes(SIGNING_KEY + b"\n")
    proc = switchyard("cache", "ls", "--dir", tmp_path / "compile", "--redis", "localhost",
                      "--key-file", key_file, check=False)
    assert proc.returncode == 2
    assert "not host:port" in proc.stderr.decode()


def test_redis_level(switchyard, tmp_path):
    version = project_version(switchyard)
    root = tmp_path / "compile"
    root.mkdir()
    key_file = tmp_path / "signing.key"
    key_file.write_bytes(SIGNING_KEY + b"\n")
    server = RedisServer()
    try:
        port = server.port
        good = [make_entry(version, bucket, 3000) for bucket in (1, 2)]
        wrong_signer = make_entry(version, 3, 3000)
        unsigned = make_entry(version, 4, 3000)
        for entry in good:
            assert redis_command(port, "SET", PREFIX + entry[0], redis_value(entry)) == b"+OK\r\n"
        redis_command(port, "SET", PREFIX + wrong_signer[0],
                      redis_value(wrong_signer, signing_key=b"someone-else-entirely"))
        redis_command(port, "SET", PREFIX + unsigned[0], redis_value(unsigned, signed=False))
        redis_command(port, "SET", "unrelated:key", "x")
        redis = ["--dir", root, "--redis", f"127.0.0.1:{port}", "--key-file", key_file]

        listed = {row[1]: row for row in lines(switchyard("cache", "ls", *redis), "redis")}
        assert set(listed) == {good[0][0], good[1][0], wrong_signer[0], unsigned[0]}
        assert "graph_digest=e2e" in listed[good[0][0]]
        assert "(bad:" in listed[wrong_signer[0]]

        stats = switchyard("cache", "stats", *redis).stdout.decode()
        assert f"redis 127.0.0.1:{port}: 4 entries" in stats

        proc = switchyard("cache", "verify", *redis, check=False)
        assert proc.returncode == 1
        text = proc.stdout.decode()
        assert "signed with another key" in text and "unsigned entry" in text
        switchyard("cache", "verify", *redis, "--remove-bad")
        assert redis_command(port, "EXISTS", PREFIX + unsigned[0]) == b":0\r\n"
        assert "2 ok, 0 bad" in switchyard("cache", "verify", *redis).stdout.decode()

        proc = switchyard("cache", "prune", *redis, "--all")
        assert "redis removed 2 entries" in proc.stdout.decode()
        assert redis_command(port, "EXISTS", "unrelated:key") == b":1\r\n"
        assert lines(switchyard("cache", "ls", *redis), "redis") == []
    finally:
        server.kill()

    # Redis gone: a failure in bounded time, not a hang.
    start = time.monotonic()
    proc = switchyard("cache", "stats", "--dir", root, "--redis", f"127.0.0.1:{free_port()}",
                      "--key-file", key_file, check=False, timeout=30)
    assert proc.returncode == 1
    assert time.monotonic() - start < 10
