"""Progressive rollouts: a new revision of an app spread over clusters goes step by step.

An app with a `rollout` (`fleet.control.registry.records.RolloutSpec`) has every instance
pinned to a revision (`pins`); the worker syncs a pinned instance at its pin whatever triggered
the sync (`worker.jobs`), so a push reaches a cluster only when its step does. The coordinator's
scheduler runs the controller (`controller.RolloutController.tick`) as one more step of its
leader-elected tick: it finds the newest commit of the app's revision (`heads`), plans the steps
(`plan`), moves the pins of one step to the new revision and asks for their syncs, and judges the
step on the syncs that applied it (`judge`): a sync record at the new revision that finished after
the step started. The whole state lives in Redis (`state`), so a new leader carries on.
"""
