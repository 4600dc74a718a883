module probegate-epollspike

go 1.26
