"""Everything sized by a Scale, around the ALBERT of the core, in floors:

- scale.py, data.py: the scales (the course's sizes) and the course's tokenizer and pretraining sets;
- experiments/: the model zoo and the paper's experiments at course scale;
- the lessons' machinery: the one-line checks of the learner's pieces and their reference code,
  self-check questions, student versions and notebook cleaning, diagrams, figures and plots, widgets,
  verdicts, the environment check, the cache pack for a GPU machine without network, and the command
  line (cli.py, commands.py).

A reader who wants ALBERT itself can skip this folder: the model lives in the core (minialbert/), which
takes plain values and never sees a Scale.
"""
