"""Pairwise ratings: the battle reader, Bradley-Terry and online Elo with bootstrap intervals."""
