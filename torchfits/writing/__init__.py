"""Writing and editing FITS files: HDU writers, table layouts, tile compression, checksums,
in-place edits; every write goes through the atomic sink.
"""
