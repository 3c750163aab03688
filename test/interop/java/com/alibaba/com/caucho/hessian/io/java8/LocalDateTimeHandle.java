package com.alibaba.com.caucho.hessian.io.java8;

import java.io.Serializable;
import java.time.LocalDateTime;

/**
 * What Dubbo's hessian-lite writes for a java.time.LocalDateTime: an object
 * of its class of this name, whose date and time are themselves handles.
 */
public class LocalDateTimeHandle implements Serializable {
    private static final long serialVersionUID = 1L;
    private LocalDateHandle date;
    private LocalTimeHandle time;

    public LocalDateTimeHandle(LocalDateTime t) {
        date = new LocalDateHandle(t.toLocalDate());
        time = new LocalTimeHandle(t.toLocalTime());
    }
}
