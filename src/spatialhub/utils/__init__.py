"""spatialhub.utils"""
