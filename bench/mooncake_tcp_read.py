#!/usr/bin/env python3
"""Mooncake's TransferEngine (TCP transport) reading KV-sized blocks over loopback.

Run with a python that has Mooncake (`mooncake-transfer-engine-non-cuda` from PyPI; the
CUDA build needs libcuda). Two processes, two engines, P2P handshake (no metadata
server): this process starts a target child (`--role target`) that registers --blocks
blocks of --block-bytes, then reads them all into a registered local buffer with one
batch_transfer_sync_read of --blocks block-sized transfers per batch, back to back for at
least --seconds after a first (checked) batch. Prints one JSON line: gbps, batches,
seconds, and the Mooncake package that ran.

bench/kvx_peer_bench.py runs it beside switchyard's PeerBlockClient (--peers mooncake).
"""
import argparse
import ctypes
import importlib.metadata
import json
import subprocess
import sys
import time

from mooncake.engine import TransferEngine


def start_engine():
    engine = TransferEngine()
    if engine.initialize("127.0.0.1", "P2PHANDSHAKE", "tcp", "") != 0:
        sys.exit("mooncake: TransferEngine.initialize(P2PHANDSHAKE, tcp) failed")
    return engine


def registered_buffer(engine, size):
    """(buffer, address): keep the buffer referenced while the engine may use the address."""
    buffer = ctypes.create_string_buffer(size)
    address = ctypes.addressof(buffer)
    if engine.register_memory(address, size) != 0:
        sys.exit("mooncake: register_memory failed")
    return buffer, address


def mooncake_package():
    dist = importlib.metadata.packages_distributions()["mooncake"][0]
    return f"{dist} {importlib.metadata.version(dist)}"


def block_byte(block):
    return bytes([block % 251 + 1])


def serve_target(blocks, block_bytes):
    """Registers the blocks, each filled with its own byte, prints where, waits for EOF."""
    engine = start_engine()
    buffer, address = registered_buffer(engine, blocks * block_bytes)
    for b in range(blocks):
        ctypes.memmove(address + b * block_bytes, block_byte(b) * block_bytes, block_bytes)
    print(json.dumps({"port": engine.get_rpc_port(), "address": address}), flush=True)
    sys.stdin.read()


def read_blocks(blocks, block_bytes, seconds):
    target = subprocess.Popen(
        [sys.executable, __file__, "--role", "target", "--blocks", str(blocks),
         "--block-bytes", str(block_bytes)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        where = json.loads(target.stdout.readline() or "null")
        if where is None:
            sys.exit("mooncake: the target process exited before registering its blocks")
        engine = start_engine()
        buffer, local = registered_buffer(engine, blocks * block_bytes)
        name = f"127.0.0.1:{where['port']}"
        remote_blocks = [(i * 7) % blocks for i in range(blocks)]
        locals_ = [local + i * block_bytes for i in range(blocks)]
        remotes = [where["address"] + r * block_bytes for r in remote_blocks]
        lengths = [block_bytes] * blocks

        def batch():
            if engine.batch_transfer_sync_read(name, locals_, remotes, lengths) != 0:
                sys.exit("mooncake: batch_transfer_sync_read failed")

        batch()  # connects; its bytes are checked, its time is not counted
        for i, r in enumerate(remote_blocks):
            got = ctypes.string_at(local + i * block_bytes, block_bytes)
            if got != block_byte(r) * block_bytes:
                sys.exit(f"mooncake: block {i} did not carry remote block {r}'s bytes")
        batches, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            batch()
            batches += 1
        elapsed = time.perf_counter() - start
        return {"gbps": batches * blocks * block_bytes * 8 / elapsed / 1e9,
                "batches": batches, "seconds": elapsed, "package": mooncake_package()}
    finally:
        target.stdin.close()
        target.wait(timeout=30)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--role", choices=["initiator", "target"], default="initiator")
    parser.add_argument("--blocks", type=int, default=64)
    parser.add_argument("--block-bytes", type=int, default=512 * 1024)
    parser.add_argument("--seconds", type=float, default=2.0)
    args = parser.parse_args()
    if args.role == "target":
        serve_target(args.blocks, args.block_bytes)
    else:
        print(json.dumps(read_blocks(args.blocks, args.block_bytes, args.seconds)))


if __name__ == "__main__":
    main()
