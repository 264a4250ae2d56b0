"""Reading replies: which fenced blocks run, in which order, and prose FINAL lines."""

from __future__ import annotations

from tinyagents_nb.rlm import ReplyPart, extract_code_blocks, final_from_text, reply_parts


def test_python_and_repl_blocks_run_in_order_other_languages_do_not() -> None:
    text = (
        "First:\n```python\nx = 1\n```\nthen a shell line\n```bash\nrm -rf /\n```\n"
        "```repl\nprint(x)\n```\n```json\n{}\n```\n```\nuntagged = True\n```\n"
    )
    assert extract_code_blocks(text) == ["x = 1", "print(x)", "untagged = True"]


def test_indented_and_longer_fences_and_an_unclosed_last_block() -> None:
    text = "  ````py\n  if True:\n      print(1)\n  ````\n```python\nprint('cut off"
    assert extract_code_blocks(text) == ["if True:\n    print(1)", "print('cut off"]


def test_no_blocks_and_empty_blocks() -> None:
    assert extract_code_blocks("just prose") == []
    assert extract_code_blocks("```python\n\n```") == []


def test_final_from_prose() -> None:
    assert final_from_text("Done.\nFINAL(42)") == "42"
    assert final_from_text("FINAL('the answer')") == "the answer"
    assert final_from_text("no final here") is None


def test_reply_parts_keep_the_prose_around_each_runnable_block_in_order() -> None:
    text = "Look first.\n```python\nx = 1\n```\nA shell line:\n```bash\nls\n```\n```python\n\n```\n  ```py\n  print(x)\n  ```\nDone."
    parts = reply_parts(text)
    assert parts == [
        ReplyPart("Look first.\n"),
        ReplyPart("x = 1", 0),
        ReplyPart("\nA shell line:\n```bash\nls\n```\n```python\n\n```\n"),  # not runnable, or empty: prose
        ReplyPart("print(x)", 1),
        ReplyPart("\nDone."),
    ]
    assert [p.text for p in parts if p.index is not None] == extract_code_blocks(text)
    assert reply_parts("just prose") == [ReplyPart("just prose")]
    assert reply_parts("```python\nprint('cut off") == [ReplyPart("print('cut off", 0)]
