"""What people see: terminal views, SQL, HTML reports, the progress bar. Nothing below imports them."""
