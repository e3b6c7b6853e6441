"""The foundation every stage stands on: frozen records, errors, files, memos, settings and
dtypes.
"""
