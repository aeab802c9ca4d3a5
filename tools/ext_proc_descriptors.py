#!/usr/bin/env python3
"""Writes the FileDescriptorSet that the router's ext_proc server is generated from
(src/router/extproc/proto/ext_proc.pb).

No Debian or PyPI package ships Envoy's .proto sources; PyPI `xds-protos` (pinned in
tools/requirements.txt) ships the modules generated from them, each holding its file's
serialized descriptor. This collects envoy/service/ext_proc/v3/external_processor.proto and
every file it imports, transitively, dependencies first, except google/protobuf/* (protoc
takes those from libprotobuf-dev's /usr/include, matching the C++ runtime it links).

    .venv/bin/python tools/ext_proc_descriptors.py > src/router/extproc/proto/ext_proc.pb
"""
import sys

from google.protobuf import descriptor_pb2
from envoy.service.ext_proc.v3 import external_processor_pb2

ROOT = external_processor_pb2.DESCRIPTOR


def ordered_files(root):
    """The files root needs, each after its dependencies, google/protobuf/* left out."""
    seen = set()
    ordered = []

    def visit(fd):
        if fd.name in seen or fd.name.startswith("google/protobuf/"):
            return
        seen.add(fd.name)
        for dep in fd.dependencies:
            visit(dep)
        ordered.append(fd)

    visit(root)
    return ordered


def main():
    files = descriptor_pb2.FileDescriptorSet()
    for fd in ordered_files(ROOT):
        files.file.add().ParseFromString(fd.serialized_pb)
    sys.stdout.buffer.write(files.SerializeToString(deterministic=True))


if __name__ == "__main__":
    main()
