"""toolbox"""
