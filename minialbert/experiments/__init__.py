"""The paper's experiments at course scale, on top of the core: the model zoo (the pretraining runs the
lessons share), the downstream tasks and fine-tuning, the NSP-vs-SOP ablation, the layer-smoothness
analysis and the synthetic permutation chains.

They import the core and the corpus, never the course's machinery (tests/test_layout.py).
"""
