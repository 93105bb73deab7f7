from .loop import GenerationOutput, generate

__all__ = ["GenerationOutput", "generate"]
