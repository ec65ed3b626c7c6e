"""Imported last by the tests' fork server (conftest.PRELOAD), after every module its children share: what the server
holds so far leaves the garbage collector's sight (gc.freeze), so a child's collections skip the hundreds of thousands
of objects torch and the rest made (pytest's collections as a forked suite ends took half a second), and the pages they
sit on stay shared with the server instead of being copied when a collection touches them."""

import gc

gc.freeze()
