"""The course's machinery, for its lessons and their tools: the one-line checks of the learner's pieces
and their reference code, self-check questions, student versions and notebook cleaning, diagrams,
figures and plots, widgets, verdicts, the environment check, and the cache pack for a GPU machine without
network.

A reader who wants ALBERT itself can skip this folder: the model lives in the core (minialbert/).
"""
