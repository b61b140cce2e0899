"""The entry point the cann-recipes-infer articles use, served by deepinfer:

    from cann_recipes_infer import InferenceEngine
    engine = InferenceEngine(config_path="configs/deepseek/infer_config.json")
    output = engine.generate(prompt="...", max_new_tokens=512, temperature=0.7, top_p=0.95,
                             stream=False)
"""

from deepinfer import InferenceEngine, TextStream

__all__ = ["InferenceEngine", "TextStream"]
