"""Landing: what happens to a task's branch after its last stage passes
(`land = "merge"` moves the base branch through a merge queue, `land = "pr"`
pushes the branch and opens a pull request). Each mode is a function from a
`LandRequest` to a `LandOutcome`; the tick's landing step records the answer.
"""
