"""What the coding agent knows and may do: instructions, skills, templates, tool policy."""
