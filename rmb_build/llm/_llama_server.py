"""Entry point of the embedded server process: ``python -m rmb_build.llm._llama_server``.

Runs ``llama_cpp.server`` with two local fixes:
- llama.cpp's extra CPU buffer types (AMX/repacked weights) segfault on the first multi-token batch
  on some virtualised Xeons, so they are off unless RMB_LLAMA_EXTRA_BUFTS=1;
- Gemma 3 270M's GGUF has no chat template and llama-cpp-python's "gemma" format adds no <bos>
  (the model then only echoes the prompt): ``rmb-gemma3`` is the Gemma 3 template with <bos>, the
  system message folded into the first user turn as Gemma 3 expects;
- a watchdog exits this process when the process that started it is gone, so a parent killed
  with SIGKILL never leaves an orphaned server behind.
"""

from __future__ import annotations

import os
import sys

from rmb_build.core.lifeline import die_with_named_parent


def disable_extra_buffer_types() -> None:
    """Make every ``llama_cpp.Llama`` load weights without extra (repacked/AMX) buffer types."""
    import llama_cpp.llama as llama_mod

    raw = llama_mod.llama_cpp
    original = raw.llama_model_default_params
    if getattr(original, "_rmb_patched", False):
        return

    def default_params():
        params = original()
        params.use_extra_bufts = False
        return params

    default_params._rmb_patched = True  # type: ignore[attr-defined]
    raw.llama_model_default_params = default_params


def register_gemma3_format() -> None:
    """Register the ``rmb-gemma3`` chat format (see the module docstring)."""
    from llama_cpp import llama_chat_format as fmt

    @fmt.register_chat_format("rmb-gemma3")
    def gemma3(messages, **kwargs):
        system = "\n\n".join(m["content"] for m in messages if m["role"] == "system" and m.get("content"))
        prompt = "<bos>"
        for m in (m for m in messages if m["role"] != "system"):
            content = m.get("content") or ""
            if system and m["role"] == "user":
                content, system = f"{system}\n\n{content}", ""
            role = "model" if m["role"] == "assistant" else "user"
            prompt += f"<start_of_turn>{role}\n{content}<end_of_turn>\n"
        return fmt.ChatFormatterResponse(prompt=prompt + "<start_of_turn>model\n", stop="<end_of_turn>")


def main(argv: list[str]) -> None:
    die_with_named_parent(signal_too=False)  # the parent set the signal where it could (server.py)
    if os.environ.get("RMB_LLAMA_EXTRA_BUFTS") != "1":
        disable_extra_buffer_types()
    register_gemma3_format()
    from llama_cpp.server.__main__ import main as server_main

    sys.argv = ["llama_cpp.server", *argv]
    server_main()


if __name__ == "__main__":
    main(sys.argv[1:])
