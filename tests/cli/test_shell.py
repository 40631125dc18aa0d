"""How the command line tells a fault of the machine (memory, disk) from a fault in seakr: one line naming
what to do, or the traceback."""


def test_out_of_memory_is_told_from_other_faults():
    from seakr.cli.shell import out_of_memory

    cpu = RuntimeError("[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate memory: "
                       "you tried to allocate 40400000000000 bytes. Error code 12 (Cannot allocate memory)")
    assert out_of_memory(cpu).startswith("out of memory (asked for 40,400.0 GB): lower k")
    cuda = type("OutOfMemoryError", (RuntimeError,), {})("CUDA out of memory. Tried to allocate 20.00 GiB (GPU 0)")
    assert "(asked for 20.00 GiB)" in out_of_memory(cuda) and out_of_memory(MemoryError()).startswith("out of memory:")
    ours = MemoryError("cannot allocate 289.4 GB for a call of 100,001 rows (100 new tokens each): 21.0 GB are free on cpu")
    assert out_of_memory(ours).startswith("out of memory (asked for 289.4 GB; 21.0 GB are free): lower k")
    assert out_of_memory(RuntimeError("shape mismatch")) is None  # a fault in seakr keeps its traceback
    # a command that runs no model was told to lower k and load the model in a smaller precision
    assert out_of_memory(MemoryError(), "index") == ("out of memory: the files `seakr index` read did not fit; "
                                                     "split them, or run it where there is more memory")


def test_a_full_disk_is_one_line_that_says_what_is_kept():
    """A full disk during eval wrote a traceback from inside the row log's close (found on a 200 KB tmpfs)."""
    import errno

    from seakr.cli.shell import disk_refused

    said = disk_refused(OSError(errno.ENOSPC, "No space left on device", "/runs/x/config.json"))
    assert said.startswith("no space left on the device (writing /runs/x/config.json); what was written before it is kept")
    assert "--resume" in said and disk_refused(OSError(errno.EROFS, "ro")).startswith("the file system is read-only;")
    assert disk_refused(OSError(errno.EBADF, "bad descriptor")) is None  # a fault in seakr keeps its traceback
    # a file-size limit (ulimit -f, a scheduler's) refuses a write as a full disk does: it was a traceback
    assert disk_refused(OSError(errno.EFBIG, "File too large", "/runs/x/results.jsonl")).startswith(
        "a file reached the size limit set for this process (ulimit -f) (writing /runs/x/results.jsonl); what was")
