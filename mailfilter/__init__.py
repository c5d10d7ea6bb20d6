"""dupfilter: duplicate and near-duplicate mail filter."""

__version__ = "0.1.0"
