"""The .model language: its syntax tree, parser, resolver into the Spec IR, formatter and
grammar tables.
"""
