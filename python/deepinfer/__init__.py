"""deepinfer: a C++ inference engine for LLM / MoE models, from Python.

    from deepinfer import InferenceEngine
    engine = InferenceEngine(config_path="configs/qwen/infer_config.json")
    print(engine.generate("Hello", max_new_tokens=32))
    for piece in engine.generate("Hello", stream=True):
        print(piece, end="", flush=True)
    print(engine.chat([{"role": "user", "content": "Hi!"}]))

The engine itself is the compiled module ``_deepinfer`` (pybind11), installed beside this
package by ``pip install .`` or found in the CMake build directory (``build/python``).
"""

from _deepinfer import InferenceEngine, TextStream, __version__

__all__ = ["InferenceEngine", "TextStream", "__version__"]
