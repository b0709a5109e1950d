"""The actor side of Complementary RL: the rollout (episodes played in lockstep, with retrieved experience in the
prompt), the GRPO trainer, and the Ray workers that play rollouts on copies of the model. It talks to the
experience side only through :mod:`comprl.experience`'s manager and its episode records."""
