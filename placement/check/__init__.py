"""The pre-deploy check: catalogue seats and compose stacks."""
