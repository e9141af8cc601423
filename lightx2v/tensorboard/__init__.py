"""TensorBoard with the PyTorch Profiler plugin (torch-tb-profiler 0.4.3), fixed for today's traces.

`python -m lightx2v.tensorboard` starts stock TensorBoard after patching the installed plugin in-process
(see `patches`); it takes TensorBoard's own flags. This package never shadows the real `tensorboard`:
absolute imports (`import tensorboard`) still resolve to it.
"""
