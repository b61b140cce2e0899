"""The entry point the cann-recipes-infer articles use, served by deepinfer:

    from cann_recipes_infer import InferenceEngine
    engine = InferenceEngine(config_path="configs/deepseek/infer_config.json")
    output = engine.generate(prompt="...", max_new_tokens=512, temperature=0.7, top_p=0.95,
                             stream=False)

The engine (the compiled module) is imported on first use, so the command-line entry points
beside it (cann_recipes_infer.benchmark: the articles' benchmark.py) work with only the
`deepinfer` command built.
"""

__all__ = ["InferenceEngine", "TextStream"]


def __getattr__(name):
    if name in __all__:
        import deepinfer

        return getattr(deepinfer, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
