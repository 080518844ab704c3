"""A child process speaking the wire, as both stdio clients read and end it
(`checkpointspec.backends.stdio.child`)."""

from __future__ import annotations

import subprocess
import sys
import tempfile

from checkpointspec.backends.stdio.child import ReplyLines, end_process, stderr_tail


def test_reply_lines_frame_what_was_read() -> None:
    replies = ReplyLines()
    replies.ask(10.0)
    assert replies.took(b'{"id":1,')
    assert replies.line() is None
    assert replies.took(b'"result":1}\n{"id":2')
    assert replies.line() == b'{"id":1,"result":1}'
    assert replies.line() is None


def test_an_empty_read_is_the_child_exiting() -> None:
    assert not ReplyLines().took(b"")


def test_a_line_is_due_within_the_seconds_asked() -> None:
    replies = ReplyLines()
    replies.ask(30.0)
    assert 29.0 < replies.remaining() <= 30.0
    replies.ask(0.0)
    assert replies.remaining() == 0.0


def test_stderr_tail_is_the_end_of_the_file() -> None:
    with tempfile.TemporaryFile() as stderr:
        stderr.write(b"x" * 5000 + b"the end")
        stderr.flush()
        assert stderr_tail(stderr, 7) == "the end"
        assert len(stderr_tail(stderr, 800)) == 800


def test_a_child_ends_at_end_of_file_on_its_stdin() -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read(); sys.exit(3)"],
        stdin=subprocess.PIPE,
    )
    end_process(child, 30.0)
    assert child.returncode == 3


def test_a_child_that_does_not_end_is_killed() -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)"], stdin=subprocess.PIPE
    )
    end_process(child, 0.5)
    assert child.returncode == -9
