"""Deterministic generator of tiny and bench-size test models for Switchyard.

Everything here is a pure function of a seed: corpus text, trained tokenizers, random weights
and the files written from them, so regenerating gives byte-identical output.
"""
