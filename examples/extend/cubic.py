"""A row map of one's own: ReLU(z)^3, normalized, under the name ``cubic``."""

from attnlab import rowmaps


@rowmaps.register("cubic", formula="ReLU(z_i)^3 / sum_j ReLU(z_j)^3", source="Polynomial Concentration §5.3")
def _cubic(name, match):
    return {}, lambda z: rowmaps.relu_power(z, 3.0, 0.0)
