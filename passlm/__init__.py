"""The pass-ordering language model: tokenizer, training examples, training and evaluation (thesis ch. 4)."""
