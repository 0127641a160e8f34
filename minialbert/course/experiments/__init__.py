"""The paper's experiments at course scale, on top of the core: the model zoo (the pretraining runs the
lessons share), the offline downstream tasks, the NSP-vs-SOP ablation, the layer-smoothness analysis and
the synthetic permutation chains.

They import the core, the corpus and the scale with its data sets (course/scale.py, course/data.py),
never the lessons' machinery (tests/test_layout.py).
"""
